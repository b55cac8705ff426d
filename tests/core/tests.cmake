crossbench_test(synthetic_test LABEL cpu LINKS crossbench_base SOURCES ${CMAKE_CURRENT_LIST_DIR}/synthetic_test.cpp)
crossbench_test(statistics_test LABEL cpu LINKS crossbench_base SOURCES ${CMAKE_CURRENT_LIST_DIR}/statistics_test.cpp)
crossbench_test(runner_test LABEL cpu LINKS crossbench_engines SOURCES ${CMAKE_CURRENT_LIST_DIR}/runner_test.cpp)
crossbench_test(options_schema_test LABEL cpu LINKS crossbench_base SOURCES ${CMAKE_CURRENT_LIST_DIR}/options_schema_test.cpp)
