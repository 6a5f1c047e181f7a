#pragma once
/// @file
/// vtape's version. CMake reads the three numbers from this file (the one place they are written),
/// so `find_package(vtape 0.2)` and `vt::version()` always agree.
#define VTAPE_VERSION_MAJOR 0
#define VTAPE_VERSION_MINOR 2
#define VTAPE_VERSION_PATCH 0

namespace vt {

/// The version of the vtape library a program runs against, as "major.minor.patch". It may differ
/// from the `VTAPE_VERSION_*` macros the program was compiled with when a shared libvtape was
/// replaced after the build.
const char* version();

}  // namespace vt
