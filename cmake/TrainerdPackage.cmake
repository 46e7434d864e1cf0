# The Debian package of the service (component "service"): `cpack -G DEB` in the build
# folder of the Debian-LibTorch build (scripts/package.sh) writes trainerd_<version>_amd64.deb:
#   /usr/bin/trainerd, trainerctl, trainer-run, trainer-launch
#   /lib/systemd/system/trainerd.service
#   /usr/lib/sysusers.d/trainerd.conf, /usr/lib/tmpfiles.d/trainerd.conf
#   /etc/trainerd/trainerd.yaml (the service's daemon config), job.yaml (the bundled job):
#     conffiles, kept across upgrades when edited
#   /usr/share/doc/trainerd/examples: the configs, Prometheus and Grafana files, examples/
#   /usr/share/man/man1, man8: the three man pages (docs/man); trainerctl's bash completion
# Its dependencies come from the binaries (dpkg-shlibdeps: LibTorch, SQLite, yaml-cpp, ...),
# so only a build against Debian's LibTorch makes a package that installs.
# The component's destinations are paths of the root file system (usr/bin, etc/trainerd,
# lib/systemd/system), the package's prefix is /: `cmake --install build --component service
# --prefix ROOT` stages the same tree under ROOT.
install(TARGETS trainerd trainerctl trainer-run trainer-launch RUNTIME DESTINATION usr/bin COMPONENT service)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/trainerd.service DESTINATION lib/systemd/system
        COMPONENT service)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/trainerd.sysusers.conf DESTINATION usr/lib/sysusers.d
        RENAME trainerd.conf COMPONENT service)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/trainerd.tmpfiles.conf DESTINATION usr/lib/tmpfiles.d
        RENAME trainerd.conf COMPONENT service)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/trainerd.yaml DESTINATION etc/trainerd
        COMPONENT service)
install(FILES ${PROJECT_SOURCE_DIR}/configs/default.yaml DESTINATION etc/trainerd RENAME job.yaml
        COMPONENT service)
# The operator's guide the alerts' runbook_url links point at, and the outcomes and input
# quality guides the service config's outcomes: and data_quality: comments name.
install(FILES ${PROJECT_SOURCE_DIR}/docs/operations.md ${PROJECT_SOURCE_DIR}/docs/outcomes.md
              ${PROJECT_SOURCE_DIR}/docs/data-quality.md
        DESTINATION usr/share/doc/trainerd COMPONENT service)
set(trainerd_examples usr/share/doc/trainerd/examples)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${trainerd_examples}/configs
        COMPONENT service)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/prometheus ${PROJECT_SOURCE_DIR}/deploy/grafana
        DESTINATION ${trainerd_examples} COMPONENT service)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/torchscript ${PROJECT_SOURCE_DIR}/examples/plugin
        DESTINATION ${trainerd_examples} COMPONENT service)

# Man pages, gzipped as Debian ships them, and trainerctl's bash completion.
set(trainerd_man_dir ${PROJECT_BINARY_DIR}/man)
foreach(page trainerd.8 trainerctl.1 trainer-run.1 trainer-launch.1)
  string(REGEX REPLACE ".*\\.([0-9])$" "\\1" section ${page})
  add_custom_command(OUTPUT ${trainerd_man_dir}/${page}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${trainerd_man_dir}
    COMMAND ${CMAKE_COMMAND} -E copy ${PROJECT_SOURCE_DIR}/docs/man/${page} ${trainerd_man_dir}/${page}
    COMMAND gzip -9nf ${trainerd_man_dir}/${page}
    DEPENDS ${PROJECT_SOURCE_DIR}/docs/man/${page} VERBATIM)
  list(APPEND trainerd_man_pages ${trainerd_man_dir}/${page}.gz)
  install(FILES ${trainerd_man_dir}/${page}.gz DESTINATION usr/share/man/man${section}
          COMPONENT service)
endforeach()
add_custom_target(trainerd_man_pages ALL DEPENDS ${trainerd_man_pages})
install(FILES ${PROJECT_SOURCE_DIR}/deploy/bash-completion/trainerctl
        DESTINATION usr/share/bash-completion/completions COMPONENT service)

set(trainerd_conffiles ${PROJECT_BINARY_DIR}/debian/conffiles)
file(WRITE ${trainerd_conffiles} "/etc/trainerd/trainerd.yaml\n/etc/trainerd/job.yaml\n")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME trainerd)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "trainerd developers <trainerd@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "nightly LibTorch training daemon that plans training into a device memory budget")
set(CPACK_PACKAGE_DESCRIPTION
    "trainerd runs a team's nightly training job as a systemd service: it measures a memory "
    "ledger, plans microbatches, gradient accumulation, activation checkpointing and "
    "precision to fit the budget and the completion window, checks the plan's parity with "
    "the whole batch, records every run in SQLite, exports Prometheus metrics and falls "
    "back to the last known-good config after an OOM, a crash or a regression.")
set(CPACK_PACKAGING_INSTALL_PREFIX /)
set(CPACK_COMPONENTS_ALL service)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "systemd")
# Without an optimized BLAS LibTorch 1.13 uses the reference BLAS (~30x slower fp32).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libopenblas0-openmp")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${trainerd_conffiles} ${PROJECT_SOURCE_DIR}/deploy/debian/postinst
    ${PROJECT_SOURCE_DIR}/deploy/debian/prerm ${PROJECT_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_STRIP_FILES TRUE)
include(CPack)
