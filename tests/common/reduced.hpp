// Whether the tests are built with AMLA_TEST_REDUCED (tests/CMakeLists.txt): slow instrumented
// builds (the sanitizer pass) shrink exhaustive sweeps and run fewer cases of the slowest tests;
// the Release pass runs them at full size.
#pragma once

namespace amla_test {

#ifdef AMLA_TEST_REDUCED
inline constexpr bool reduced = true;
#else
inline constexpr bool reduced = false;
#endif

}  // namespace amla_test
