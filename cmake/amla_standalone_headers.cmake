# amla_standalone_header_sources(<out-var> <header-ext> <source-dir>): one generated source file
# per public header under include/amla/ whose name ends in <header-ext> (detail/ excepted), written
# into <source-dir> with the source extension that matches (.cpp for .hpp, .cu for .cuh). Each
# file includes its header twice: compiling it proves the header compiles on its own, and the
# second include proves its guard works.
function(amla_standalone_header_sources out_var header_ext source_dir)
  if(header_ext STREQUAL "cuh")
    set(source_ext cu)
  else()
    set(source_ext cpp)
  endif()
  file(GLOB_RECURSE headers CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}/include
       ${PROJECT_SOURCE_DIR}/include/amla/*.${header_ext})
  set(sources)
  foreach(h IN LISTS headers)
    if(h MATCHES "/detail/")
      continue()
    endif()
    string(MAKE_C_IDENTIFIER ${h} id)
    set(out ${source_dir}/${id}.${source_ext})
    file(CONFIGURE OUTPUT ${out} CONTENT "#include <${h}>\n#include <${h}>\n")
    list(APPEND sources ${out})
  endforeach()
  set(${out_var} ${sources} PARENT_SCOPE)
endfunction()
