#pragma once
// The examples under mpirun: when vtape was built with its MPI layer (VTAPE_WITH_MPI) and the process was started by an
// MPI launcher (mpirun, srun), each rank takes a slice of the batch and the batch reductions span every rank (vt::mpi).
// Otherwise every function here is the single-process one, so the examples behave identically without MPI.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>
#include <vtape/vtape.hpp>
#ifdef VTAPE_WITH_MPI
#include <memory>
#include <vtape/mpi/mpi.hpp>
#endif

namespace example_mpi {

#ifdef VTAPE_WITH_MPI
class Scope {
 public:
  Scope(int& argc, char**& argv) {
    if (vt::mpi::launched()) session_ = std::make_unique<vt::mpi::Session>(argc, argv);
  }
  bool on() const { return session_ != nullptr; }
  int rank() const { return on() ? vt::mpi::rank() : 0; }
  int size() const { return on() ? vt::mpi::size() : 1; }

 private:
  std::unique_ptr<vt::mpi::Session> session_;
};
inline bool on() { return vt::mpi::active(); }
// This rank's slice of a batch, and the whole batch back.
inline vt::Tensor shard(const vt::Tensor& x) { return on() ? vt::mpi::shard(x) : x; }
inline vt::Tensor gather(const vt::Tensor& x) { return on() ? vt::mpi::gather(x) : x; }
// The mean over the (global) batch of a batched tensor.
inline vt::Tensor batch_mean(const vt::Tensor& x) { return on() ? vt::mpi::global_mean(x) : vt::mean(x); }
inline vt::Tensor replicated(const vt::Tensor& x) { return on() ? vt::mpi::replicated(x) : x; }
// f(args...), raising the same error on every rank.
template <class F, class... Args>
decltype(auto) call(F&& f, Args&&... args) {
  if (on()) return vt::mpi::call(std::forward<F>(f), std::forward<Args>(args)...);
  return std::forward<F>(f)(std::forward<Args>(args)...);
}
inline long long bytes_sent() { return on() ? vt::mpi::counters().bytes_sent : 0; }
// The device that --device names; under mpirun, `cuda` without an ordinal is this rank's GPU (vt::mpi::device(): one
// rank per GPU), so that the ranks on a node do not all share cuda:0.
inline vt::Device device(const std::string& name) {
  if (on() && name == "cuda" && vt::mpi::device().kind == vt::DeviceKind::cuda) return vt::mpi::device();
  return vt::parse_device(name);
}
// This rank's share [first, first + count) of n items (the even split, vt::mpi::slice).
inline std::pair<std::int64_t, std::int64_t> my_share(std::int64_t n) {
  if (!on()) return {0, n};
  const vt::mpi::Slice s = vt::mpi::slice(n, vt::mpi::rank());
  return {s.offset, s.count};
}
// The sum over ranks.
inline double sum_over_ranks(double x) { return on() ? vt::mpi::allreduce(vt::Tensor::scalar(x)).item() : x; }
// Every rank's row (each of one length), rank 0's first, on every rank.
inline std::vector<double> rows_of_every_rank(const std::vector<double>& row) {
  const vt::Tensor mine = vt::Tensor::from_vector(row, {1, static_cast<std::int64_t>(row.size())});
  return on() ? vt::mpi::gather(mine).to_vector<double>() : row;
}
#else
class Scope {
 public:
  Scope(int&, char**&) {}
  bool on() const { return false; }
  int rank() const { return 0; }
  int size() const { return 1; }
};
inline bool on() { return false; }
inline vt::Tensor shard(const vt::Tensor& x) { return x; }
inline vt::Tensor gather(const vt::Tensor& x) { return x; }
inline vt::Tensor batch_mean(const vt::Tensor& x) { return vt::mean(x); }
inline vt::Tensor replicated(const vt::Tensor& x) { return x; }
template <class F, class... Args>
decltype(auto) call(F&& f, Args&&... args) {
  return std::forward<F>(f)(std::forward<Args>(args)...);
}
inline long long bytes_sent() { return 0; }
inline vt::Device device(const std::string& name) { return vt::parse_device(name); }
inline std::pair<std::int64_t, std::int64_t> my_share(std::int64_t n) { return {0, n}; }
inline double sum_over_ranks(double x) { return x; }
inline std::vector<double> rows_of_every_rank(const std::vector<double>& row) { return row; }
#endif

}  // namespace example_mpi
