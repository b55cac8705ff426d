crossbench_test(plan_test LABEL cpu LINKS crossbench_cluster crossbench_engines SOURCES ${CMAKE_CURRENT_LIST_DIR}/plan_test.cpp)
crossbench_test(oom_boundary_test LABEL cpu LINKS crossbench_cluster crossbench_engines SOURCES ${CMAKE_CURRENT_LIST_DIR}/oom_boundary_test.cpp)
crossbench_test(collector_test LABEL cpu LINKS crossbench_cluster crossbench_engines SOURCES ${CMAKE_CURRENT_LIST_DIR}/collector_test.cpp)
crossbench_test(resume_check_test LABEL cpu LINKS crossbench_cluster crossbench_engines SOURCES ${CMAKE_CURRENT_LIST_DIR}/resume_check_test.cpp)
if(TARGET OpenMP::OpenMP_CXX)  # the test starts OpenMP teams, as oneDNN does
  crossbench_test(stop_request_test LABEL cpu LINKS crossbench_cluster OpenMP::OpenMP_CXX SOURCES ${CMAKE_CURRENT_LIST_DIR}/stop_request_test.cpp)
endif()
