#pragma once
// Runs the Catch2 tests linked into this program with the command line's options (catch_session.cpp).
int run_catch_session(int argc, char** argv);
