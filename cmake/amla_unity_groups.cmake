# amla_unity_groups(<target> <sources...>): compiles <sources> of <target> as CMake unity groups
# (UNITY_BUILD_MODE GROUP), several .cpp files included into one translation unit, so the headers
# they share (Eigen, Catch2, amla's inline functions and everything they instantiate) are parsed,
# instantiated and optimised once per group instead of once per file.
#
# In one translation unit, whatever a file declares at namespace scope (anonymous namespaces
# included) and every macro it defines is visible to the files after it. Two files therefore go
# to different groups when a name that one of them declares at namespace scope appears in the
# other's code (a redefinition, a -Wshadow warning or an ambiguous call otherwise); comments,
# string and character literals and member names (after . or ->) are not code for this. The names
# are read from the source text: with the root .clang-format every namespace-scope declaration
# starts at column 0, so the scan looks only at lines that start with a letter or '#': types,
# variables, functions and macros. An alias (`using X = ...;`, `namespace x = ...;`) is a name
# like the others except that two files declaring it with the same text do not clash, and a
# namespace alias clashes only with uses as a qualifier (`x::`). Files are placed, in path order,
# into the first group they do not clash with; a group holds at most AMLA_UNITY_GROUP_MAX files.
# Fewer groups are faster: every group instantiates and optimises the templates its files share
# (Eigen's product kernels above all) once more, so test files keep their namespace-scope names
# apart: a file whose names clash with an earlier file's starts a second group.
#
# A file the scan misapprehends can be compiled on its own with
#   set_source_files_properties(<file> PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
# before the call. Compiler messages name the original file and line, not the unity file.
set(AMLA_UNITY_GROUP_MAX 32 CACHE STRING "Most test files compiled as one unity translation unit")

# The names <file> declares at namespace scope (<out_names>), its aliases as name=declaration
# (<out_aliases>), and every identifier it uses (<out_tokens>).
function(_amla_unity_scan file out_names out_aliases out_tokens)
  file(READ ${file} text)
  # An identifier inside a comment or a string or character literal is not a use.
  string(REGEX REPLACE
         "//[^\n]*|/\\*([^*]|\\*+[^*/])*\\*+/|\"([^\"\\\\\n]|\\\\.)*\"|'([^'\\\\\n]|\\\\.)*'"
         " " code "${text}")
  # Nor is a member's name (after . or ->): a namespace-scope declaration cannot change it.
  string(REGEX REPLACE "(\\.|->)[ \t\n]*[A-Za-z_][A-Za-z0-9_]*" " " code "${code}")
  # List separators and brackets would split or join CMake list elements; neither is needed here.
  string(REGEX REPLACE "[][;\\\\]" " " code "${code}")
  string(REGEX REPLACE "[][;\\\\]" " " text "${text}")
  string(REGEX MATCHALL "[A-Za-z_][A-Za-z0-9_]*" tokens "${code}")
  # A namespace alias can only be used as a qualifier (x::) or after the keyword namespace; those
  # uses are listed again as x:: so that a local variable named x does not count as one.
  string(REGEX MATCHALL "[A-Za-z_][A-Za-z0-9_]*[ \t\n]*::|namespace[ \t\n]+[A-Za-z_][A-Za-z0-9_]*"
         qualifiers "${code}")
  foreach(q IN LISTS qualifiers)
    string(REGEX REPLACE "^namespace[ \t\n]+|[ \t\n]*::$" "" q "${q}")
    list(APPEND tokens "${q}::")
  endforeach()
  list(REMOVE_DUPLICATES tokens)
  string(REPLACE "\n" ";" lines "${text}")
  set(names)
  set(aliases)
  set(id "[A-Za-z_][A-Za-z0-9_]*")
  foreach(line IN LISTS lines)
    if(line MATCHES "^[ \t]+namespace +(${id}) *=")
      # A namespace alias in a block: declared with the same text at namespace scope elsewhere,
      # it means the same thing in both.
      set(alias ${CMAKE_MATCH_1})
      string(REGEX REPLACE "[ \t]+" " " decl "${line}")
      string(STRIP "${decl}" decl)
      list(APPEND aliases "${alias}=${decl}")
    endif()
    if(NOT line MATCHES "^[A-Za-z_#]")
      continue()
    endif()
    set(name "")
    if(line MATCHES "^#[ \t]*define[ \t]+(${id})")
      set(name ${CMAKE_MATCH_1})
    elseif(line MATCHES "^(TEST_CASE|TEMPLATE_TEST_CASE|TEMPLATE_PRODUCT_TEST_CASE|SCENARIO|namespace [A-Za-z_:]* *[{]|using namespace|template|static_assert|#)")
      # Catch2 test cases are uniquely named by the macro; the rest declares nothing by name.
    elseif(line MATCHES "^(struct|class|union|enum|concept)( class| struct)? +(${id})")
      set(name ${CMAKE_MATCH_3})
    elseif(line MATCHES "^(using|namespace) +(${id}) *=")
      set(alias ${CMAKE_MATCH_2})
      string(REGEX REPLACE "[ \t]+" " " decl "${line}")
      string(STRIP "${decl}" decl)
      list(APPEND aliases "${alias}=${decl}")
    elseif(line MATCHES "^[A-Za-z_][A-Za-z0-9_:<>,*& ]*[ *&](${id}) *([(]|=|[{]|$)")
      set(name ${CMAKE_MATCH_1})
    endif()
    if(name AND NOT name STREQUAL "operator")
      list(APPEND names ${name})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES names)
  set(${out_names} "${names}" PARENT_SCOPE)
  set(${out_aliases} "${aliases}" PARENT_SCOPE)
  set(${out_tokens} "${tokens}" PARENT_SCOPE)
endfunction()

# True in <out> when a file or group with <names> and <aliases> clashes with one that uses
# <tokens> and declares <other_aliases>.
function(_amla_unity_clash out names aliases tokens other_aliases)
  foreach(n IN LISTS names)
    if(n IN_LIST tokens)
      set(${out} TRUE PARENT_SCOPE)
      return()
    endif()
  endforeach()
  foreach(a IN LISTS aliases)
    string(REGEX REPLACE "=.*" "" n "${a}")
    if(a MATCHES "^[A-Za-z0-9_]*=namespace ")
      string(APPEND n "::")
    endif()
    if(n IN_LIST tokens AND NOT a IN_LIST other_aliases)
      set(${out} TRUE PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} FALSE PARENT_SCOPE)
endfunction()

function(amla_unity_groups target)
  set(sources ${ARGN})
  list(SORT sources)
  set(ngroups 0)
  foreach(src IN LISTS sources)
    get_source_file_property(skip ${src} SKIP_UNITY_BUILD_INCLUSION)
    if(skip)
      continue()
    endif()
    _amla_unity_scan(${src} names aliases tokens)
    set(placed FALSE)
    set(g 0)
    while(g LESS ngroups AND NOT placed)
      list(LENGTH _g${g}_files count)
      if(count LESS AMLA_UNITY_GROUP_MAX)
        _amla_unity_clash(clash_a "${names}" "${aliases}" "${_g${g}_tokens}" "${_g${g}_aliases}")
        _amla_unity_clash(clash_b "${_g${g}_names}" "${_g${g}_aliases}" "${tokens}" "${aliases}")
        if(NOT clash_a AND NOT clash_b)
          set(placed TRUE)
          break()
        endif()
      endif()
      math(EXPR g "${g} + 1")
    endwhile()
    if(NOT placed)
      set(g ${ngroups})
      math(EXPR ngroups "${ngroups} + 1")
    endif()
    list(APPEND _g${g}_files ${src})
    list(APPEND _g${g}_names ${names})
    list(APPEND _g${g}_aliases ${aliases})
    list(APPEND _g${g}_tokens ${tokens})
    list(REMOVE_DUPLICATES _g${g}_tokens)
    set_source_files_properties(${src} PROPERTIES UNITY_GROUP ${target}_${g})
  endforeach()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
endfunction()
