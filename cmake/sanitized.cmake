# vtape_sanitized: libvtape again, at -O1 with AddressSanitizer and UndefinedBehaviorSanitizer, for the unit tests and
# the fuzzer, whose objects are compiled once and linked against both libraries (tests/CMakeLists.txt): the tests'
# own code is the same in both programs, uninstrumented (the library is what they check; every allocation, the
# tests' too, still gets the sanitizer's redzones), so compiling it twice bought nothing. -g1: line tables, enough for
# the sanitizers' stack traces. No CUDA module (the GPU is not what this checks), no MPI layer.
set(VTAPE_SANITIZE_FLAGS -O1 -g1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)

# The Eigen kernel files without UndefinedBehaviorSanitizer's pointer checks (alignment, null, pointer overflow,
# object size, vptr), which instrument every one of Eigen's inlined loads and stores, and without AddressSanitizer's
# stack checks: the kernels read and write tensors' buffers, which are on the heap and stay checked at every access,
# while the stack's redzones were those of Eigen's inlined temporaries. Both were much of those files' compile time
# (docs/performance.md, "Build and test times"). The arithmetic checks stay.
set(VTAPE_SANITIZE_KERNEL_FLAGS -fno-sanitize=alignment,null,pointer-overflow,vptr,object-size)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND VTAPE_SANITIZE_KERNEL_FLAGS --param=asan-stack=0)
elseif(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  list(APPEND VTAPE_SANITIZE_KERNEL_FLAGS -mllvm -asan-stack=0)
endif()

set(vtape_sanitized_sources ${VTAPE_SOURCES})
list(REMOVE_ITEM vtape_sanitized_sources ${VTAPE_LONG_SOURCES})
add_library(vtape_sanitized_kernels OBJECT ${VTAPE_LONG_SOURCES})
add_library(vtape_sanitized STATIC ${vtape_sanitized_sources} core/shape.cpp $<TARGET_OBJECTS:vtape_sanitized_kernels>)
foreach(target vtape_sanitized vtape_sanitized_kernels)
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${VTAPE_BUILD_INCLUDE}>)
  target_link_libraries(${target} PUBLIC Eigen3::Eigen fmt::fmt PRIVATE OpenMP::OpenMP_CXX)
  target_compile_options(${target} PRIVATE ${VTAPE_PRIVATE_FLAGS} ${VTAPE_SANITIZE_FLAGS})
endforeach()
target_compile_options(vtape_sanitized_kernels PRIVATE ${VTAPE_SANITIZE_KERNEL_FLAGS})
target_precompile_headers(vtape_sanitized PRIVATE ${VTAPE_PRECOMPILED_HEADERS})
target_link_options(vtape_sanitized INTERFACE -fsanitize=address,undefined)
