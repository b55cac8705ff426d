# Data-parallel training (src/comm, gradient buckets, the engines' data-parallel
# sessions). The multi-rank tests run under mpiexec: 2 and 4 ranks on CPUs
# (label mpi), 2 ranks with one GPU each (label gpu; skips below 2 GPUs).
crossbench_test(gradient_buckets_test LABEL cpu LINKS crossbench_core
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/gradient_buckets_test.cpp)

# An MPI gtest program (its own main) run by ctest under mpiexec with `ranks` ranks.
function(crossbench_mpi_test name label ranks)
  add_test(NAME ${name}_np${ranks}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} --oversubscribe $<TARGET_FILE:${name}>)
  set_tests_properties(${name}_np${ranks} PROPERTIES LABELS ${label} TIMEOUT 600
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1")
endfunction()

if(CROSSBENCH_ENABLE_ONEDNN)
  add_executable(onednn_data_parallel_test ${CMAKE_CURRENT_LIST_DIR}/onednn_data_parallel_test.cpp)
  target_link_libraries(onednn_data_parallel_test PRIVATE crossbench_comm crossbench_runner crossbench_engines GTest::gtest)
  target_include_directories(onednn_data_parallel_test PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_CURRENT_LIST_DIR})
  crossbench_mpi_test(onednn_data_parallel_test mpi 2)
  crossbench_mpi_test(onednn_data_parallel_test mpi 4)
endif()
if(CROSSBENCH_ENABLE_CUDA)
  add_executable(cudnn_data_parallel_test ${CMAKE_CURRENT_LIST_DIR}/cudnn_data_parallel_test.cpp)
  target_link_libraries(cudnn_data_parallel_test PRIVATE crossbench_comm crossbench_runner crossbench_engines GTest::gtest)
  target_include_directories(cudnn_data_parallel_test PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_CURRENT_LIST_DIR})
  crossbench_mpi_test(cudnn_data_parallel_test gpu 2)
endif()
