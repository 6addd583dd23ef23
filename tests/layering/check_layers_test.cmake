# Tests cmake/check_layers.cmake itself: on a copy of src/ it passes, and each violation planted in the
# copy makes it fail, naming the file and the include.
# Usage: cmake -DROOT=<project root> -DWORK=<scratch dir> -P check_layers_test.cmake
cmake_minimum_required(VERSION 3.25)

set(checker "${ROOT}/cmake/check_layers.cmake")
set(table "${ROOT}/docs/architecture.md")
set(failures 0)

function(run_checker tree out_rc out_text)
  execute_process(COMMAND "${CMAKE_COMMAND}" "-DSRC=${tree}" "-DTABLE=${table}" -P "${checker}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${out_rc} "${rc}" PARENT_SCOPE)
  set(${out_text} "${out}${err}" PARENT_SCOPE)
endfunction()

# A fresh copy of the real tree under WORK/<name>.
function(fresh_copy name out_dir)
  set(dir "${WORK}/${name}")
  file(REMOVE_RECURSE "${dir}")
  file(MAKE_DIRECTORY "${dir}")
  file(COPY "${ROOT}/src/" DESTINATION "${dir}")
  set(${out_dir} "${dir}" PARENT_SCOPE)
endfunction()

# Plants `line` at the end of `file` in a fresh copy and expects the checker to fail mentioning `expect`.
function(expect_violation name file line expect)
  fresh_copy("${name}" dir)
  if(NOT EXISTS "${dir}/${file}")
    message(SEND_ERROR "${name}: the tree has no ${file} to plant the violation in")
    return()
  endif()
  file(APPEND "${dir}/${file}" "\n${line}\n")
  run_checker("${dir}" rc text)
  if(rc EQUAL 0)
    message(SEND_ERROR "${name}: the checker passed a tree where ${file} has ${line}")
  else()
    string(FIND "${text}" "${expect}" at)
    if(at EQUAL -1)
      message(SEND_ERROR "${name}: the checker failed but did not say \"${expect}\":\n${text}")
    else()
      message(STATUS "${name}: caught (${expect})")
    endif()
  endif()
endfunction()

# The unmodified copy passes.
fresh_copy(clean dir)
run_checker("${dir}" rc text)
if(NOT rc EQUAL 0)
  message(SEND_ERROR "clean: the checker failed on an unmodified copy of src/:\n${text}")
endif()

expect_violation(core_includes_store core/result.hpp "#include \"store/history.hpp\""
                 "src/core/result.hpp: includes \"store/history.hpp\"")
expect_violation(allocator_includes_server allocator/select.cpp "#include \"server/router.hpp\""
                 "src/allocator/select.cpp: includes \"server/router.hpp\"")
expect_violation(scheduler_includes_sampler scheduler/node_allocator.cpp "#include \"sampler/monitor.hpp\""
                 "src/scheduler/node_allocator.cpp: includes \"sampler/monitor.hpp\"")
# The node's use cases reach storage through the ports only.
expect_violation(node_includes_store node/agent.cpp "#include \"store/history.hpp\""
                 "src/node/agent.cpp: includes \"store/history.hpp\"")
# The sampler may use the backend interface, not a vendor's folder.
expect_violation(sampler_includes_a_vendor sampler/hub.cpp "#include \"backends/nvml/nvml_api.hpp\""
                 "src/sampler/hub.cpp: includes \"backends/nvml/nvml_api.hpp\"")
# A vendor may not use another vendor.
expect_violation(vendor_includes_vendor backends/sim/sim_backend.cpp "#include \"backends/nvml/nvml_api.hpp\""
                 "src/backends/sim/sim_backend.cpp: includes \"backends/nvml/nvml_api.hpp\"")
# The same include in angle brackets is held to the same table.
expect_violation(core_includes_store_angle core/snapshot.hpp "#include <store/history.hpp>"
                 "src/core/snapshot.hpp: includes <store/history.hpp>")
expect_violation(wire_includes_server_angle wire/json.cpp "#  include <server/http.hpp>"
                 "src/wire/json.cpp: includes <server/http.hpp>")
expect_violation(relative_include wire/json.cpp "#include \"json_detail.hpp\""
                 "src/wire/json.cpp: includes \"json_detail.hpp\"")

# A new vendor folder needs no row: the backends/*/ pattern covers it, with its own folder allowed and
# another vendor's, or the DRM helpers (the rows of amdgpu and intel only), refused.
fresh_copy(new_vendor dir)
file(MAKE_DIRECTORY "${dir}/backends/newvendor")
file(WRITE "${dir}/backends/newvendor/newvendor_backend.cpp"
     "#include \"backends/backend.hpp\"\n#include \"backends/newvendor/newvendor_backend.hpp\"\n#include \"core/result.hpp\"\n")
run_checker("${dir}" rc text)
if(NOT rc EQUAL 0)
  message(SEND_ERROR "new_vendor: the checker failed on a new vendor folder that keeps to its row:\n${text}")
endif()
expect_violation(new_vendor_includes_drm backends/nvml/nvml_backend.cpp "#include \"backends/drm/sysfs.hpp\""
                 "src/backends/nvml/nvml_backend.cpp: includes \"backends/drm/sysfs.hpp\"")

# A folder the table does not know is a violation too (a new folder gets its row first).
fresh_copy(unknown_folder dir)
file(MAKE_DIRECTORY "${dir}/mystery")
file(WRITE "${dir}/mystery/thing.hpp" "#pragma once\n")
run_checker("${dir}" rc text)
string(FIND "${text}" "src/mystery/thing.hpp: its folder has no row" at)
if(rc EQUAL 0 OR at EQUAL -1)
  message(SEND_ERROR "unknown_folder: expected a failure naming src/mystery/thing.hpp, got rc=${rc}:\n${text}")
endif()

file(REMOVE_RECURSE "${WORK}")
