if(CROSSBENCH_ENABLE_ONEDNN)
  # RESCAN: crossbench_base (the runner) and crossbench_engines (the registry) refer to each other.
  crossbench_test(onednn_layers_test LABEL cpu LINKS "$<LINK_GROUP:RESCAN,crossbench_engines,crossbench_base>"
                  SOURCES ${CMAKE_CURRENT_LIST_DIR}/onednn_layers_test.cpp ${CMAKE_CURRENT_LIST_DIR}/reference_network.cpp
                          ${CMAKE_CURRENT_LIST_DIR}/onednn_layer_times_test.cpp)
endif()
# The engine kit shared by both native engines (src/engines/kit/).
crossbench_test(engine_kit_test LABEL cpu LINKS crossbench_engines
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/buffer_plan_test.cpp ${CMAKE_CURRENT_LIST_DIR}/graph_state_test.cpp)
