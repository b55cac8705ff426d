crossbench_test(plan_test LABEL cpu LINKS crossbench_dist crossbench_engines SOURCES ${CMAKE_CURRENT_LIST_DIR}/plan_test.cpp)
crossbench_test(resume_check_test LABEL cpu LINKS crossbench_dist crossbench_engines SOURCES ${CMAKE_CURRENT_LIST_DIR}/resume_check_test.cpp)
