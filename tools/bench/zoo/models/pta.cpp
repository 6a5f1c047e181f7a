// Pulsar timing (B1855+09, model "white_ecorr" of ../shared/data/pta_B1855+09/README.md) in two forms, per-epoch sums
// by segment_sum and by products with the shared TOA x epoch indicator; and grouped data (examples/gp_grouped.cpp:
// per-class EFAC, per-group ECORR) on closed-form synthetic data. Both are Woodbury + determinant lemma over
// disjoint groups, so each limit is one pass over the points per example (PTA) or none at all (grouped).
#include <vtape/core/eigen.hpp>

#include <Eigen/Dense>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numbers>
#include <stdexcept>

#include "../zoo.hpp"

namespace {

using vt::Tensor;

// ---------------------------------------------------------------------------------------------- PTA

struct PtaData {
  std::int64_t n = 0, epochs = 0;
  Tensor y, y2, s2, backend, epoch, epoch_backend, U;  // U only for the shared form
  std::vector<double> theta0;
};

Tensor load(const std::string& dir, const std::string& file) {
  const std::string path = dir + "/" + file;
  if (!std::filesystem::exists(path)) throw std::runtime_error("pta: missing data file " + path);
  return vt::load_npy(path);
}

std::shared_ptr<const PtaData> load_pta(const std::string& data, bool with_indicator) {
  const std::string dir = data + "/pta_B1855+09";
  auto d = std::make_shared<PtaData>();
  d->y = load(dir, "residuals.npy");
  d->s2 = vt::square(load(dir, "toaerrs.npy"));
  d->y2 = vt::square(d->y);
  d->backend = vt::astype(load(dir, "backend.npy"), vt::DType::i64);
  d->epoch = vt::astype(load(dir, "epoch.npy"), vt::DType::i64);
  d->epoch_backend = vt::astype(load(dir, "epoch_backend.npy"), vt::DType::i64);
  d->theta0 = load(dir, "theta_noisedict.npy").to_vector<double>();
  d->n = d->y.shape(0);
  d->epochs = d->epoch_backend.shape(0);
  if (with_indicator) {
    std::vector<double> u(static_cast<std::size_t>(d->n * d->epochs), 0.0);
    const std::vector<std::int64_t> ep = d->epoch.to_vector<std::int64_t>();
    for (std::int64_t i = 0; i < d->n; ++i)
      u[static_cast<std::size_t>(i * d->epochs + ep[static_cast<std::size_t>(i)])] = 1.0;
    d->U = Tensor::from_vector(u, {d->n, d->epochs});
  }
  return d;
}

// theta: efac[4], log10_t2equad[4], log10_ecorr[4] (param_names.txt's order).
Tensor pta_white(const PtaData& d, const Tensor& theta) {
  const Tensor efac = vt::slice(theta, 0, 0, 4), equad = vt::slice(theta, 0, 4, 8);
  return vt::square(vt::take(efac, d.backend)) * (d.s2 + vt::pow(10.0, 2.0 * vt::take(equad, d.backend)));
}

// Woodbury and the determinant lemma over the disjoint epochs: a = U^T N^-1 y, d = U^T N^-1 1.
Tensor pta_finish(const PtaData& d, const Tensor& theta, const Tensor& N, const Tensor& a, const Tensor& dd) {
  const Tensor phi = vt::pow(10.0, 2.0 * vt::take(vt::slice(theta, 0, 8, 12), d.epoch_backend));
  const Tensor quad = vt::sum(d.y2 / N) - vt::sum(vt::square(a) / (1.0 / phi + dd));
  const Tensor logdet = vt::sum(vt::log(N)) + vt::sum(vt::log(1.0 + phi * dd));
  return -0.5 * (quad + logdet);
}

// The hand-fused limit, shared by both forms. Per example one vectorised pass over the TOAs accumulates, per epoch,
// a = sum y/N, d = sum 1/N and the sums the gradient needs: with D = 1/phi + d,
//   dL/dN_i = ((y_i - a/D)^2 + 1/D) / (2 N_i^2) - 1/(2 N_i),
// whose sums over an epoch (times N_i, and plain) expand into per-epoch sums, so no second pass is needed.
// The SIMD lanes are epochs: the epochs of each backend, longest first, go in packs of `width`, whose TOAs are
// interleaved (TOA t of every lane, then t + 1) and padded with TOAs that weigh nothing (1/sigma^2 = 0, y = 0), and
// missing lanes are empty epochs (they add 0), so the per-epoch sums land in lanes and need no horizontal sums.
struct PtaLimit {
  static constexpr std::size_t width = 4;
  using Packet = Eigen::Array<double, width, 1>;
  std::vector<double> y, inv_s2;     // interleaved by pack
  std::vector<std::size_t> start;    // pack p is y[start[p] .. start[p+1]), whole packets
  std::vector<std::size_t> backend;  // of pack p
  std::vector<Packet> count;         // TOAs per lane of pack p
  double count_backend[4] = {0, 0, 0, 0};
  double sum_log_s2 = 0;  // log N_i = log(efac^2 s2_i) + log(1 + q / s2_i)

  explicit PtaLimit(const PtaData& d) {
    const std::vector<double> yv = d.y.to_vector<double>(), s2 = d.s2.to_vector<double>();
    const std::vector<std::int64_t> ep = d.epoch.to_vector<std::int64_t>();
    const std::vector<std::int64_t> eb = d.epoch_backend.to_vector<std::int64_t>();
    std::vector<std::vector<std::size_t>> members(eb.size());
    for (std::size_t i = 0; i < yv.size(); ++i) members[static_cast<std::size_t>(ep[i])].push_back(i);
    std::vector<std::size_t> order(eb.size());
    for (std::size_t e = 0; e < order.size(); ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t e, std::size_t f) {
      return eb[e] != eb[f] ? eb[e] < eb[f] : members[e].size() > members[f].size();
    });
    start.push_back(0);
    for (std::size_t o = 0; o < order.size();) {
      const auto k = static_cast<std::size_t>(eb[order[o]]);
      std::vector<std::size_t> lanes;
      for (; o < order.size() && lanes.size() < width && static_cast<std::size_t>(eb[order[o]]) == k; ++o)
        lanes.push_back(order[o]);
      const std::size_t length = members[lanes[0]].size();
      Packet c = Packet::Zero();
      for (std::size_t t = 0; t < length; ++t)
        for (std::size_t l = 0; l < width; ++l) {
          const bool real = l < lanes.size() && t < members[lanes[l]].size();
          const std::size_t i = real ? members[lanes[l]][t] : 0;
          y.push_back(real ? yv[i] : 0.0);
          inv_s2.push_back(real ? 1.0 / s2[i] : 0.0);
          if (real) sum_log_s2 += std::log(s2[i]);
          if (real) c[static_cast<Eigen::Index>(l)] += 1.0;
        }
      start.push_back(y.size());
      backend.push_back(k);
      count.push_back(c);
      count_backend[k] += c.sum();
    }
  }

  void operator()(const double* thetas, std::int64_t batch, double* values, double* grads) const {
    const double ln10 = std::numbers::ln10;
    const std::size_t packs = backend.size();
#pragma omp parallel for schedule(static)
    for (std::int64_t b = 0; b < batch; ++b) {
      const double* th = thetas + b * 12;
      double* g = grads + b * 12;
      double f2[4], q[4], phi[4];
      for (int k = 0; k < 4; ++k) {
        f2[k] = th[k] * th[k];
        q[k] = std::pow(10.0, 2.0 * th[4 + k]);
        phi[k] = std::pow(10.0, 2.0 * th[8 + k]);
      }
      // Per backend: sum_i dL/dN_i N_i (efac), sum_i dL/dN_i (equad), sum_e 2 dL/dphi_e (ecorr).
      Packet gn[4], gs[4], gc[4];
      for (int k = 0; k < 4; ++k) gn[k] = gs[k] = gc[k] = Packet::Zero();
      Packet total = Packet::Zero();  // quadratic form + log det (1 + phi d) + log prod(1 + q/s2)
      for (std::size_t p = 0; p < packs; ++p) {
        const std::size_t k = backend[p];
        const double inv_f2 = 1.0 / f2[k], qk = q[k], ph = phi[k];
        Packet a = Packet::Zero(), d = a, y2n = a, yn2 = a, n2 = a, y2n2 = a, prod = Packet::Ones();
        for (std::size_t j = start[p]; j < start[p + 1]; j += width) {
          const Eigen::Map<const Packet> yj(y.data() + j), is(inv_s2.data() + j);
          const Packet t = is * qk;                    // q / s2
          const Packet inv = inv_f2 * is / (1.0 + t);  // 1/N = 1 / (f^2 s2 (1 + q/s2))
          const Packet yi = yj * inv;
          a += yi;
          d += inv;
          y2n += yj * yi;
          yn2 += yi * inv;
          n2 += inv * inv;
          y2n2 += yi * yi;
          prod *= 1.0 + t;  // one log per epoch instead of per TOA (each factor >= 1, at most 49 of them)
        }
        const Packet D = 1.0 / ph + d, m = a / D, h = 1.0 + ph * d;
        total += y2n - a * m + h.log() + prod.log();
        // sum_i (y_i - m)^2 / N_i and / N_i^2, expanded in the accumulated sums.
        gn[k] += 0.5 * (y2n - 2.0 * m * a + m * m * d + d / D - count[p]);
        gs[k] += 0.5 * (y2n2 - 2.0 * m * yn2 + m * m * n2 + n2 / D - d);
        gc[k] += (a * a / h - d) / h;
      }
      double log_efac2 = 0;
      for (int k = 0; k < 4; ++k) log_efac2 += count_backend[k] * std::log(f2[k]);
      values[b] = -0.5 * (total.sum() + sum_log_s2 + log_efac2);
      for (int k = 0; k < 4; ++k) {
        g[k] = 2.0 / th[k] * gn[k].sum();                    // dN/defac = 2 N / efac
        g[4 + k] = f2[k] * q[k] * 2.0 * ln10 * gs[k].sum();  // dN/dequad = efac^2 q 2 ln10
        g[8 + k] = ln10 * phi[k] * gc[k].sum();              // dphi/decorr = 2 ln10 phi
      }
    }
  }
};

zoo::Model pta_model(const std::string& data, bool shared) {
  const std::shared_ptr<const PtaData> d = load_pta(data, shared);
  zoo::Model m;
  m.base = d->theta0;
  m.limit = PtaLimit(*d);
  if (shared) {
    m.name = "pta_shared";
    m.about = fmt::format(
        "pulsar timing white noise + ECORR (B1855+09: {} TOAs, {} epochs, 12 parameters), per-epoch "
        "sums as products by the shared {} x {} indicator",
        d->n, d->epochs, d->n, d->epochs);
    m.log_density = [d](const Tensor& theta) {
      const Tensor N = pta_white(*d, theta);
      return pta_finish(*d, theta, N, vt::matmul(d->y / N, d->U), vt::matmul(1.0 / N, d->U));
    };
  } else {
    m.name = "pta_segment";
    m.about = fmt::format(
        "pulsar timing white noise + ECORR (B1855+09: {} TOAs, {} epochs, 12 parameters), per-epoch "
        "sums by segment_sum over epoch ids",
        d->n, d->epochs);
    m.log_density = [d](const Tensor& theta) {
      const Tensor N = pta_white(*d, theta);
      return pta_finish(*d, theta, N, vt::segment_sum(d->y / N, d->epoch, d->epochs),
                        vt::segment_sum(1.0 / N, d->epoch, d->epochs));
    };
  }
  return m;
}

// ------------------------------------------------------------------------------------------ grouped

constexpr std::int64_t grouped_points = 2000, grouped_groups = 200, grouped_classes = 4;

struct GroupedData {
  std::int64_t n = grouped_points, groups = grouped_groups, classes = grouped_classes;
  Tensor residual, error, group_of_point, class_of_point, class_of_group;
  std::vector<double> r, e;
  std::vector<std::int64_t> group, klass;  // of point, of group
};

std::shared_ptr<const GroupedData> grouped_data() {
  auto d = std::make_shared<GroupedData>();
  std::vector<std::int64_t> cp;
  for (std::int64_t g = 0; g < d->groups; ++g) d->klass.push_back(g % d->classes);
  for (std::int64_t i = 0; i < d->n; ++i) {
    const double x = static_cast<double>(i), s = std::sin(0.37 * x);
    d->e.push_back(1.0 + 0.5 * s * s);
    d->r.push_back(std::sin(0.1 * x) + 0.3 * std::cos(1.7 * x));
    d->group.push_back(i * d->groups / d->n);
    cp.push_back(d->klass[static_cast<std::size_t>(d->group.back())]);
  }
  d->residual = Tensor::from_vector(d->r, {d->n});
  d->error = Tensor::from_vector(d->e, {d->n});
  d->group_of_point = Tensor::from_ints(d->group, {d->n});
  d->class_of_point = Tensor::from_ints(cp, {d->n});
  d->class_of_group = Tensor::from_ints(d->klass, {d->groups});
  return d;
}

// The limit: w_i = exp(-2 log_efac_k) / e_i^2 factors, so the per-group sums of 1/e^2, r/e^2 and r^2/e^2 are
// computed once and an example costs O(groups), no pass over the points. SIMD lanes are groups: the groups of each
// class in packs of `width` (missing lanes are empty groups, which add 0), with the class's parameters in scalars.
struct GroupedLimit {
  static constexpr std::size_t width = 4;
  using Packet = Eigen::Array<double, width, 1>;
  std::size_t classes = 0;
  std::vector<double> S, A;        // per group, class by class, padded: sum 1/e^2, sum r/e^2
  std::vector<std::size_t> start;  // class k's groups are S[start[k] .. start[k+1])
  std::vector<double> R, count;    // per class: sum r^2/e^2 over its points, its points
  double constant = 0;             // sum log e_i^2 + n log 2 pi

  explicit GroupedLimit(const GroupedData& d) : classes(static_cast<std::size_t>(d.classes)) {
    const auto G = static_cast<std::size_t>(d.groups);
    std::vector<double> s(G, 0.0), a(G, 0.0);
    R.assign(classes, 0.0);
    count.assign(classes, 0.0);
    for (std::size_t i = 0; i < d.r.size(); ++i) {
      const auto g = static_cast<std::size_t>(d.group[i]), k = static_cast<std::size_t>(d.klass[g]);
      const double w = 1.0 / (d.e[i] * d.e[i]);
      s[g] += w;
      a[g] += w * d.r[i];
      R[k] += w * d.r[i] * d.r[i];
      count[k] += 1.0;
      constant += std::log(d.e[i] * d.e[i]);
    }
    constant += static_cast<double>(d.n) * std::log(2.0 * std::numbers::pi);
    start.push_back(0);
    for (std::size_t k = 0; k < classes; ++k) {
      for (std::size_t g = 0; g < G; ++g)
        if (static_cast<std::size_t>(d.klass[g]) == k) {
          S.push_back(s[g]);
          A.push_back(a[g]);
        }
      while (S.size() % width != 0) {
        S.push_back(0.0);
        A.push_back(0.0);
      }
      start.push_back(S.size());
    }
  }

  void operator()(const double* thetas, std::int64_t batch, double* values, double* grads) const {
    const auto K = static_cast<std::int64_t>(classes);
#pragma omp parallel for schedule(static)
    for (std::int64_t b = 0; b < batch; ++b) {
      const double* th = thetas + b * 2 * K;
      double* g = grads + b * 2 * K;
      double total = constant;  // -2 log L
      for (std::size_t k = 0; k < classes; ++k) {
        const double inv_E = std::exp(-2.0 * th[k]), J = std::exp(2.0 * th[classes + k]);
        Packet t = Packet::Zero(), gu = t, gv = t;
        for (std::size_t j = start[k]; j < start[k + 1]; j += width) {
          const Packet s = inv_E * Eigen::Map<const Packet>(S.data() + j);
          const Packet a = inv_E * Eigen::Map<const Packet>(A.data() + j);
          const Packet h = 1.0 + J * s, ih = 1.0 / h, ja = J * a * ih;  // ja = J a / h
          t += h.log() - ja * a;
          gu += ja * ja * s - 2.0 * ja * a + J * s * ih;  // d/dlog_efac: s and a scale as exp(-2 u)
          gv += s * ih - a * a * ih * ih;                 // d/dlog_ecorr: dJ = 2 J
        }
        const double wr2 = R[k] * inv_E;
        total += 2.0 * th[k] * count[k] + wr2 + t.sum();
        g[k] = wr2 + gu.sum() - count[k];
        g[classes + k] = -J * gv.sum();
      }
      values[b] = -0.5 * total;
    }
  }
};

}  // namespace

zoo::Model zoo::pta_segment(const std::string& data) { return pta_model(data, false); }

zoo::Model zoo::pta_shared(const std::string& data) { return pta_model(data, true); }

zoo::Model zoo::grouped() {
  const std::shared_ptr<const GroupedData> d = grouped_data();
  zoo::Model m;
  m.name = "grouped";
  m.about = fmt::format(
      "grouped data (examples/gp_grouped): {} points, {} groups, {} classes, per-class EFAC and "
      "per-group ECORR, take + segment_sum",
      d->n, d->groups, d->classes);
  m.base = {0.1, -0.05, 0.2, 0.0, -1.0, -0.5, -0.8, -1.2};
  m.limit = GroupedLimit(*d);
  m.log_density = [d](const Tensor& theta) {
    const Tensor log_efac = vt::slice(theta, 0, 0, d->classes);
    const Tensor log_ecorr = vt::slice(theta, 0, d->classes, 2 * d->classes);
    const Tensor sigma2 = vt::square(vt::take(vt::exp(log_efac), d->class_of_point) * d->error);  // [n]
    const Tensor w = 1.0 / sigma2;
    const Tensor s = vt::segment_sum(w, d->group_of_point, d->groups);                // [G]
    const Tensor a = vt::segment_sum(w * d->residual, d->group_of_point, d->groups);  // [G]
    const Tensor J = vt::exp(vt::take(log_ecorr, d->class_of_group) * 2.0);           // [G]
    const Tensor quadratic = vt::sum(w * vt::square(d->residual)) - vt::sum(J * vt::square(a) / (1.0 + J * s));
    const Tensor log_det = vt::sum(vt::log(sigma2)) + vt::sum(vt::log1p(J * s));
    return (quadratic + log_det + static_cast<double>(d->n) * std::log(2.0 * std::numbers::pi)) * -0.5;
  };
  return m;
}
