// Includes every CPU header and calls nothing. tests/CMakeLists.txt compiles it with every inline
// function kept and compiled_where_called.cmake reads its symbols: it must hold the non-template
// inline functions (the flag worked) and no matrix product (config.hpp, "Compiled where called").
#include "amla/amla.hpp"
