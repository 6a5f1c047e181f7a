// The sanitizers' defaults for the programs linked against the sanitized library (cmake/sanitized.cmake); the
// environment's ASAN_OPTIONS and UBSAN_OPTIONS still override them.
// allocator_may_return_null: a request too large for any machine is vtape's "out of memory" error, which the tests
// check, not a sanitizer abort.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1:detect_leaks=1"; }
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }
