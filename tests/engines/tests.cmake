if(CROSSBENCH_ENABLE_ONEDNN)
  crossbench_test(onednn_layers_test LABEL cpu LINKS crossbench_engines
                  SOURCES ${CMAKE_CURRENT_LIST_DIR}/onednn_layers_test.cpp ${CMAKE_CURRENT_LIST_DIR}/reference_network.cpp)
endif()
