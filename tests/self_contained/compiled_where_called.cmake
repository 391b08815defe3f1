# ctest -P script: the symbols of compiled_where_called.cpp's object (NM, OBJECT) hold a
# non-template inline function of attention/ (so every inline function was kept) and no Eigen
# matrix-product kernel (so no header function compiled a product that nothing called).
execute_process(COMMAND "${NM}" -C "${OBJECT}" OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -C ${OBJECT} failed (${rc})")
endif()
if(NOT symbols MATCHES "amla::attention::detail::base_panel_keys")
  message(FATAL_ERROR "${OBJECT} lacks amla::attention::detail::base_panel_keys: the inline "
                      "functions were not kept, so the check below would prove nothing")
endif()
# One search over the whole text first (a pattern that starts with [^\n]* would be tried at every
# offset of the megabytes of names); the first line is cut out only for the message.
string(REGEX MATCH "gebp_kernel|gemm_pack_|general_matrix_matrix_product|general_matrix_vector_product"
       product "${symbols}")
if(product)
  string(FIND "${symbols}" "${product}" at)
  string(SUBSTRING "${symbols}" ${at} 300 first)
  message(FATAL_ERROR "a unit that calls nothing holds a matrix-product symbol:\n  ${first}...\n"
                      "a header function that is not a template runs a product: make it "
                      "template <class = void> (config.hpp, \"Compiled where called\")")
endif()
message(STATUS "amla.hpp alone compiles no matrix product")
