// Catch2's implementation, compiled once for every test program (vtape_tests, vtape_gpu_tests):
// it is the heaviest translation unit of the tests, and none of them needs its own copy.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.hpp"

int run_catch_session(int argc, char** argv) { return Catch::Session().run(argc, argv); }
