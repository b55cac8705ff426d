if(CROSSBENCH_ENABLE_ONEDNN)
  # The Runner: layer_medians of the engine's profile.
  crossbench_test(onednn_layers_test LABEL cpu LINKS crossbench_runner crossbench_engines
                  SOURCES ${CMAKE_CURRENT_LIST_DIR}/onednn_layers_test.cpp ${CMAKE_CURRENT_LIST_DIR}/reference_network.cpp
                          ${CMAKE_CURRENT_LIST_DIR}/onednn_layer_times_test.cpp)
endif()
# The engine kit shared by both native engines (src/engines/kit/).
crossbench_test(engine_kit_test LABEL cpu LINKS crossbench_engines
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/buffer_plan_test.cpp ${CMAKE_CURRENT_LIST_DIR}/graph_state_test.cpp
                        ${CMAKE_CURRENT_LIST_DIR}/fusion_plan_test.cpp)
# Each engine's own settings from the run's schema text (cudnn_settings, worker_settings: plain C++, every build).
crossbench_test(engine_settings_test LABEL cpu LINKS crossbench_engines
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/engine_settings_test.cpp)
