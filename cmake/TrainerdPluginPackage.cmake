# The installed trainerd CMake package a model plugin builds against (models/model_registry.h,
# docs/bring-your-own-model.md): model_registry.h and the headers it includes, and
# trainerdConfig.cmake with the imported target trainerd::model_plugin and
# trainerd_add_model_plugin().
#   cmake --install build --component plugin_sdk --prefix PREFIX
# then in the plugin's project: find_package(trainerd) with CMAKE_PREFIX_PATH=PREFIX.
# A plugin links LibTorch only: trainer-run exports the trainer's symbols to what it loads.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# What a plugin compiles against: model_registry.h and what it includes (tests/trainer's
# build_test_plugins fixture builds the plugins against exactly this set).
set(trainerd_plugin_headers
  common/include/trainerd/common/enum_names.h
  common/include/trainerd/common/status.h
  trainer/include/trainerd/trainer/data/dataset.h
  trainer/include/trainerd/trainer/models/model.h
  trainer/include/trainerd/trainer/models/model_registry.h
  trainer/include/trainerd/trainer/semantics/activation_checkpoint.h
  trainer/include/trainerd/trainer/semantics/loss.h
  trainer/include/trainerd/trainer/semantics/output_chunks.h
  trainer/include/trainerd/trainer/semantics/training_fault.h
  trainer/include/trainerd/trainer/spec/data_profile.h
  trainer/include/trainerd/trainer/spec/job_spec.h)
foreach(header IN LISTS trainerd_plugin_headers)
  string(REGEX REPLACE "^[a-z]+/include/(.*)/[^/]+$" "\\1" subdir ${header})
  install(FILES ${PROJECT_SOURCE_DIR}/${header}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${subdir} COMPONENT plugin_sdk)
endforeach()

# What a plugin must agree on with the worker that loads it.
set(TRAINERD_PLUGIN_TORCH_VERSION ${Torch_VERSION})
set(TRAINERD_PLUGIN_DEFINITIONS "")
if(CAFFE2_USE_CUDA)
  set(TRAINERD_PLUGIN_DEFINITIONS TRAINERD_WITH_CUDA)
endif()
set(TRAINERD_PLUGIN_CUDA_ARCH_LIST "${TORCH_CUDA_ARCH_LIST}")
set(trainerd_package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/trainerd)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/trainerdConfig.cmake.in
  ${PROJECT_BINARY_DIR}/trainerdConfig.cmake
  INSTALL_DESTINATION ${trainerd_package_dir}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/trainerdConfigVersion.cmake
  COMPATIBILITY ExactVersion)
install(FILES ${PROJECT_BINARY_DIR}/trainerdConfig.cmake
              ${PROJECT_BINARY_DIR}/trainerdConfigVersion.cmake
        DESTINATION ${trainerd_package_dir} COMPONENT plugin_sdk)
