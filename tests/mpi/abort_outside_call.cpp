// A rank-local error outside vt::mpi::call() under a Session: the job ends (MPI_Abort), without a hang.
#include <stdexcept>
#include <vtape/mpi/mpi.hpp>
#include <vtape/vtape.hpp>
int main(int argc, char** argv) {
  try {
    vt::mpi::Session session(argc, argv);
    if (vt::mpi::rank() == 0) throw std::runtime_error("rank 0 alone");
    vt::mpi::allreduce(vt::ones({1}));  // the others wait here for rank 0
    vt::mpi::allreduce(vt::ones({1}));
  } catch (const std::exception&) {
    return 0;
  }
  return 0;
}
