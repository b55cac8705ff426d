crossbench_test(networks_test LABEL cpu LINKS crossbench_networks SOURCES ${CMAKE_CURRENT_LIST_DIR}/networks_test.cpp)
crossbench_test(synthetic_test LABEL cpu LINKS crossbench_networks SOURCES ${CMAKE_CURRENT_LIST_DIR}/synthetic_test.cpp)
