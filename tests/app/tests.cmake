crossbench_test(command_options_test LABEL cpu LINKS crossbench_app SOURCES ${CMAKE_CURRENT_LIST_DIR}/command_options_test.cpp)
