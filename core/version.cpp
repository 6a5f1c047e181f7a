#include "version.hpp"

#define VTAPE_STRING(x) #x
#define VTAPE_VERSION_STRING(major, minor, patch) VTAPE_STRING(major) "." VTAPE_STRING(minor) "." VTAPE_STRING(patch)

namespace vt {

const char* version() { return VTAPE_VERSION_STRING(VTAPE_VERSION_MAJOR, VTAPE_VERSION_MINOR, VTAPE_VERSION_PATCH); }

}  // namespace vt
