# The Runner (src/runner/): its measurement rules, driven by scripted sessions and engines.
crossbench_test(runner_test LABEL cpu LINKS crossbench_runner SOURCES ${CMAKE_CURRENT_LIST_DIR}/runner_test.cpp)
