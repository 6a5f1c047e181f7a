#pragma once
// The results a transformed function may return: a Tensor, a std::pair or std::tuple of them, or
// a std::vector of them. Transforms flatten results to a list of tensors and rebuild them.
#include <tuple>
#include <utility>
#include <vector>

#include "../core/tensor.hpp"

namespace vt::detail {

template <class T>
struct Structure;

template <>
struct Structure<Tensor> {
  static void flatten(const Tensor& t, std::vector<Tensor>& out) { out.push_back(t); }
  static Tensor rebuild(const std::vector<Tensor>& flat, std::size_t& next, const Tensor&) { return flat[next++]; }
};

template <class... Ts>
struct Structure<std::tuple<Ts...>> {
  static void flatten(const std::tuple<Ts...>& t, std::vector<Tensor>& out) {
    std::apply([&](const auto&... x) { (Structure<std::decay_t<decltype(x)>>::flatten(x, out), ...); }, t);
  }
  // `like` gives the shape of the structure (vector lengths) as it was traced.
  static std::tuple<Ts...> rebuild(const std::vector<Tensor>& flat, std::size_t& next, const std::tuple<Ts...>& like) {
    return std::apply(
        [&](const auto&... x) {
          return std::tuple<Ts...>{Structure<std::decay_t<decltype(x)>>::rebuild(flat, next, x)...};
        },
        like);
  }
};

template <class A, class B>
struct Structure<std::pair<A, B>> {
  static void flatten(const std::pair<A, B>& p, std::vector<Tensor>& out) {
    Structure<A>::flatten(p.first, out);
    Structure<B>::flatten(p.second, out);
  }
  static std::pair<A, B> rebuild(const std::vector<Tensor>& flat, std::size_t& next, const std::pair<A, B>& like) {
    A a = Structure<A>::rebuild(flat, next, like.first);
    B b = Structure<B>::rebuild(flat, next, like.second);
    return {std::move(a), std::move(b)};
  }
};

template <class T>
struct Structure<std::vector<T>> {
  static void flatten(const std::vector<T>& v, std::vector<Tensor>& out) {
    for (const T& x : v) Structure<T>::flatten(x, out);
  }
  static std::vector<T> rebuild(const std::vector<Tensor>& flat, std::size_t& next, const std::vector<T>& like) {
    std::vector<T> v;
    for (const T& x : like) v.push_back(Structure<T>::rebuild(flat, next, x));
    return v;
  }
};

template <class R>
std::vector<Tensor> flatten(const R& result) {
  std::vector<Tensor> out;
  Structure<R>::flatten(result, out);
  return out;
}

// The structure `like` with its tensors replaced, in order, by `flat`.
template <class R>
R rebuild(const std::vector<Tensor>& flat, const R& like) {
  std::size_t next = 0;
  return Structure<R>::rebuild(flat, next, like);
}

}  // namespace vt::detail
