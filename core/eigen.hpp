#pragma once
// Eigen, included the one way vtape includes it (Eigen/Dense and the rest may follow).
//
// GCC 12 reports its own AVX-512 intrinsics (avx512fintrin.h's `__m512d __Y = __Y;`) as reading
// uninitialized values wherever Eigen's vector kernels inline them (GCC bug 105593, fixed in GCC
// 13), thousands of times per build with -march=native on an AVX-512 machine. A diagnostic pragma
// applies by source location, so ignoring the two warnings around the first inclusion of the
// intrinsics' headers silences them there and nowhere else: vtape's own code keeps both warnings.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13 && (defined(__x86_64__) || defined(__i386__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
#include <Eigen/Core>
