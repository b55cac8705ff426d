crossbench_test(networks_test LABEL cpu LINKS crossbench_base SOURCES ${CMAKE_CURRENT_LIST_DIR}/networks_test.cpp)
