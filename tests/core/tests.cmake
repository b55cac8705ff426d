crossbench_test(synthetic_test LABEL cpu LINKS crossbench_base SOURCES ${CMAKE_CURRENT_LIST_DIR}/synthetic_test.cpp)
