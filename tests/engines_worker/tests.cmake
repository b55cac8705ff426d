crossbench_test(reply_validation_test LABEL cpu LINKS crossbench_engines SOURCES ${CMAKE_CURRENT_LIST_DIR}/reply_validation_test.cpp)
crossbench_test(prepare_request_test LABEL cpu LINKS crossbench_app SOURCES ${CMAKE_CURRENT_LIST_DIR}/prepare_request_test.cpp)
