# The native cuDNN engine's tests (src/engines/cudnn/). Built when the CUDA
# toolkit and cuDNN are (CROSSBENCH_ENABLE_CUDA); the `gpu` tests skip with a
# reason where no GPU is visible and run for real on a GPU machine.

# The algorithm cache and the measured choice's ordering are plain C++: tested
# in every build, on the CPU (the source compiles into the test directly).
crossbench_test(cudnn_algorithm_cache_test LABEL cpu LINKS crossbench_core
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/cudnn_algorithm_cache_test.cpp
                        ${CMAKE_SOURCE_DIR}/src/engines/cudnn/algorithm_cache.cpp
                        ${CMAKE_SOURCE_DIR}/src/engines/cudnn/cache_file.cpp)
# The runtime-compiled graph plans' file beside the algorithm cache: plain C++ too.
crossbench_test(cudnn_graph_plan_store_test LABEL cpu LINKS crossbench_core
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/cudnn_graph_plan_store_test.cpp
                        ${CMAKE_SOURCE_DIR}/src/engines/cudnn/graph_plan_store.cpp
                        ${CMAKE_SOURCE_DIR}/src/engines/cudnn/cache_file.cpp)
if(CROSSBENCH_ENABLE_CUDA)
  crossbench_test(cudnn_engine_test LABEL gpu LINKS crossbench_runner crossbench_engines
                  SOURCES ${CMAKE_CURRENT_LIST_DIR}/cudnn_engine_test.cpp)
  # The measured search's policies: engine.search_l2 = cold (the L2 flushed before every timed run),
  # engine.search_tie (the margin, applied when measured and when replayed) and
  # engine.search_warmup_ms (each candidate run untimed first), and the agreement checks of a deep
  # network's search. One binary: the GPU bundle carries each test binary whole.
  crossbench_test(cudnn_search_test LABEL gpu LINKS crossbench_engines
                  SOURCES ${CMAKE_CURRENT_LIST_DIR}/cudnn_search_l2_test.cpp ${CMAKE_CURRENT_LIST_DIR}/cudnn_search_tie_test.cpp
                          ${CMAKE_CURRENT_LIST_DIR}/cudnn_search_warmup_test.cpp
                          ${CMAKE_CURRENT_LIST_DIR}/cudnn_search_in_step_test.cpp
                          ${CMAKE_CURRENT_LIST_DIR}/cudnn_search_agreement_test.cpp)
  crossbench_test(cudnn_kernels_test LABEL gpu LINKS crossbench_engines
                  SOURCES ${CMAKE_CURRENT_LIST_DIR}/cudnn_kernels_test.cpp
                          ${CMAKE_CURRENT_LIST_DIR}/cudnn_kernels_lrn_rows_test.cpp)
  crossbench_test(cudnn_support_test LABEL cpu LINKS crossbench_engines
                  SOURCES ${CMAKE_CURRENT_LIST_DIR}/cudnn_support_test.cpp)
  # The NHWC im2col + GEMM forward's sizes and refusals: host arithmetic.
  crossbench_test(cudnn_im2col_shape_test LABEL cpu LINKS crossbench_engines
                  SOURCES ${CMAKE_CURRENT_LIST_DIR}/cudnn_im2col_shape_test.cpp)
  # The key by which a session's identical convolutions share one Graph API graph: host arithmetic.
  crossbench_test(cudnn_graph_key_test LABEL cpu LINKS crossbench_engines
                  SOURCES ${CMAKE_CURRENT_LIST_DIR}/cudnn_graph_key_test.cpp)
  # engine.conv_statistics: how a statistics plan's sums are held to its output's: host arithmetic.
  crossbench_test(cudnn_statistics_agreement_test LABEL cpu LINKS crossbench_engines
                  SOURCES ${CMAKE_CURRENT_LIST_DIR}/cudnn_statistics_agreement_test.cpp)
  crossbench_test(cudnn_plan_test LABEL cpu LINKS crossbench_engines
                  SOURCES ${CMAKE_CURRENT_LIST_DIR}/cudnn_plan_test.cpp)
  if(CROSSBENCH_ENABLE_ONEDNN)
    # Writes tests/engines_cudnn/reference.json from the oneDNN engine (see its header).
    add_executable(cudnn_reference_generator ${CMAKE_CURRENT_LIST_DIR}/cudnn_reference_generator.cpp)
    target_link_libraries(cudnn_reference_generator PRIVATE crossbench_engines)
    target_include_directories(cudnn_reference_generator PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
endif()
