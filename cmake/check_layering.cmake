# The one-way include order of DESIGN.md's "Layout", checked on every
# `#include "..."` of src/ and include/crossbench/ (the `layering` test):
#
#   core → networks → engines → {runner, comm, cube} → cluster → app
#
# A file includes only headers of its own part and of parts before it; the
# parts in braces are peers and include none of each other. Within engines,
# each engine (src/engines/<name>/) includes only its own folder and the kit
# (src/engines/kit/), and the kit includes no engine; the registry
# (src/engines/*.cpp) includes them all; outside src/engines/, no file includes
# an engine's folder: engines are reached through the registry (crossbench/engine.hpp).
# A public header belongs to the part
# that implements it (the table below); a new one must be added there.
#
#   cmake -DSOURCE_DIR=<repository> -P cmake/check_layering.cmake
cmake_minimum_required(VERSION 3.25)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_layering: -DSOURCE_DIR=<repository> is required")
endif()

# Rank of each part: a file may include a part of lower rank, or its own.
set(_rank_core 0)
set(_rank_networks 1)
set(_rank_engines 2)
set(_rank_runner 3)
set(_rank_comm 3)
set(_rank_cube 3)
set(_rank_cluster 4)
set(_rank_app 5)

# include/crossbench/<header> → the part that implements it.
set(_owner_build_info.hpp core)  # generated from src/core/build_info.hpp.in
foreach(_header cell clock communicator data_paths device engine_config error gradient_buckets layer_time measure option_field
                options options_schema result splitmix64 statistics stop_flag telemetry text_file)
  set(_owner_${_header}.hpp core)
endforeach()
set(_owner_network.hpp networks)
set(_owner_synthetic.hpp networks)
set(_owner_engine.hpp engines)
set(_owner_runner.hpp runner)
set(_owner_cube.hpp cube)

# The part and, within engines, the engine ("" elsewhere and for the registry) of a path
# below src/ ("engines/cudnn/graph.hpp") or a public header ("crossbench/engine.hpp").
function(_part_of path out_part out_engine)
  set(_engine "")
  if(path MATCHES "^crossbench/([^/]+)$")
    set(_header "${CMAKE_MATCH_1}")
    if(NOT DEFINED _owner_${_header})
      set(_part "?")
    else()
      set(_part "${_owner_${_header}}")
    endif()
  elseif(path MATCHES "^([^/]+)/")
    set(_part "${CMAKE_MATCH_1}")
    if(path MATCHES "^engines/([^/]+)/")
      set(_engine "${CMAKE_MATCH_1}")
    endif()
  else()
    set(_part "")  # a bare name: the including file's own folder
  endif()
  set(${out_part} "${_part}" PARENT_SCOPE)
  set(${out_engine} "${_engine}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE _files RELATIVE "${SOURCE_DIR}"
     "${SOURCE_DIR}/src/*.hpp" "${SOURCE_DIR}/src/*.cpp" "${SOURCE_DIR}/src/*.cu" "${SOURCE_DIR}/src/*.cuh"
     "${SOURCE_DIR}/include/crossbench/*.hpp")
list(FILTER _files EXCLUDE REGEX "^src/workers/")  # Python workers (and their helpers) include nothing of ours
set(_problems "")
set(_checked 0)
foreach(_file IN LISTS _files)
  if(_file MATCHES "^include/(.*)$")
    set(_self_path "${CMAKE_MATCH_1}")
  else()
    string(REGEX REPLACE "^src/" "" _self_path "${_file}")
  endif()
  _part_of("${_self_path}" _self _self_engine)
  if(_self STREQUAL "?")
    list(APPEND _problems "${_file}: a public header without a part: add it to cmake/check_layering.cmake")
    continue()
  endif()
  if(NOT DEFINED _rank_${_self})
    list(APPEND _problems "${_file}: folder src/${_self}/ is not in the include order of cmake/check_layering.cmake")
    continue()
  endif()
  file(STRINGS "${SOURCE_DIR}/${_file}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(_line IN LISTS _lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*$" "\\1" _included "${_line}")
    math(EXPR _checked "${_checked} + 1")
    _part_of("${_included}" _target _target_engine)
    if(_target STREQUAL "")
      continue()
    elseif(_target STREQUAL "?")
      list(APPEND _problems "${_file}: includes ${_included}, a public header without a part (cmake/check_layering.cmake)")
    elseif(NOT DEFINED _rank_${_target})
      if(EXISTS "${SOURCE_DIR}/src/${_included}" OR EXISTS "${SOURCE_DIR}/include/${_included}")
        list(APPEND _problems "${_file}: includes ${_included} of src/${_target}/, which is not in the include order")
      endif()  # else a header of a library ("oneapi/dnnl/dnnl.hpp", "nvtx3/..."): not ours
    elseif(NOT _target STREQUAL _self AND NOT _rank_${_target} LESS _rank_${_self})
      list(APPEND _problems "${_file}: ${_self} includes ${_included} of ${_target}, which comes after it "
                            "(core → networks → engines → {runner, comm, cube} → cluster → app)")
    elseif(_self STREQUAL "engines" AND _target STREQUAL "engines" AND NOT _target_engine STREQUAL ""
           AND NOT _self_engine STREQUAL "" AND NOT _target_engine STREQUAL _self_engine
           AND NOT _target_engine STREQUAL "kit")
      list(APPEND _problems "${_file}: engine ${_self_engine} includes ${_included} of engine ${_target_engine}; "
                            "an engine includes only its own folder and the kit")
    elseif(NOT _self STREQUAL "engines" AND _target STREQUAL "engines" AND NOT _target_engine STREQUAL "")
      list(APPEND _problems "${_file}: ${_self} includes ${_included} of engine ${_target_engine}; outside "
                            "src/engines/, engines are reached only through the registry (crossbench/engine.hpp)")
    endif()
  endforeach()
endforeach()

list(LENGTH _files _count)
if(_problems)
  list(JOIN _problems "\n  " _text)
  message(FATAL_ERROR "layering: includes against DESIGN.md's include order:\n  ${_text}")
endif()
message(STATUS "layering: ${_count} files, ${_checked} includes, all in DESIGN.md's include order")
