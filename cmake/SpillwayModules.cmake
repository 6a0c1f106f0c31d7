# spillway_module(NAME [USES MODULE...]): the object library spillway_NAME of NAME_sources.
#
# Its sources see the public headers (include/spillway/<m>/) of NAME and of the USES modules
# only, and the private ones (src/<m>/detail/) of NAME and core: each gets a folder in the
# build tree with links to exactly those, as its include path. A source that includes a
# header of a module it may not use, or another module's private header, fails to compile
# ("No such file"). The modules are appended to SPILLWAY_MODULES, in order.
function(spillway_module name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "USES")
  set(layer ${PROJECT_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${layer})
  file(MAKE_DIRECTORY ${layer}/include/spillway ${layer}/src)
  foreach(module IN ITEMS ${name} ${arg_USES})
    if(NOT IS_DIRECTORY ${PROJECT_SOURCE_DIR}/include/spillway/${module})
      message(FATAL_ERROR "spillway_module(${name}): no module '${module}'")
    endif()
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/spillway/${module}
         ${layer}/include/spillway/${module} SYMBOLIC)
  endforeach()
  # Private headers: the module's own, and core's (the helpers every module shares: checked
  # CUDA calls, NVTX ranges, byte codecs); another module's detail/ is out of reach.
  set(private ${name} core)
  list(REMOVE_DUPLICATES private)
  foreach(module IN LISTS private)
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${module} ${layer}/src/${module} SYMBOLIC)
  endforeach()
  add_library(spillway_${name} OBJECT ${${name}_sources})
  target_include_directories(spillway_${name} PRIVATE ${layer}/include ${layer}/src)
  target_link_libraries(spillway_${name} PRIVATE spillway_build_settings)
  set(SPILLWAY_MODULES ${SPILLWAY_MODULES} ${name} PARENT_SCOPE)
  set_property(TARGET spillway_${name} PROPERTY SPILLWAY_LAYER ${layer})
endfunction()
