# The HDF5 results cube and the CellResult JSON record (src/cube, src/core/result.cpp).
crossbench_test(cube_test LABEL cpu LINKS crossbench_cube
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/cube_test.cpp ${CMAKE_CURRENT_LIST_DIR}/result_json_test.cpp
                        ${CMAKE_CURRENT_LIST_DIR}/cube_layer_times_test.cpp ${CMAKE_CURRENT_LIST_DIR}/cube_merge_test.cpp)
# The tests create HDF5 files of their own (a file without schema, ...).
target_include_directories(cube_test SYSTEM PRIVATE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
target_compile_definitions(cube_test PRIVATE ${HDF5_C_DEFINITIONS})
target_link_libraries(cube_test PRIVATE ${HDF5_C_LIBRARIES})

# Writes a sample cube for tests/python/test_cube_xarray.py (xarray, h5py, netCDF4).
add_executable(write_sample_cube ${CMAKE_CURRENT_LIST_DIR}/write_sample_cube.cpp)
target_link_libraries(write_sample_cube PRIVATE crossbench_cube)
