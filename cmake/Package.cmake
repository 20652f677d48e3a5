# `./dev package`: a Debian package of the installed layout (cmake/Install.cmake) through CPack.
# Depends comes from dpkg-shlibdeps on the stripped binary; lintian is run on the result by
# ./dev package. Build a package with -DATTNVIZ_NATIVE=OFF: a -march=native binary only runs on
# CPUs like the build machine's.
set(ATTNVIZ_MAINTAINER "attnviz maintainers <maintainers@users.noreply.a-seed-f1eefef6.example>"
    CACHE STRING "Maintainer field of the .deb")

# Debian policy: a copyright file and a compressed changelog in /usr/share/doc/<package>.
set(ATTNVIZ_DOC_DIR ${CMAKE_INSTALL_DATADIR}/doc/attnviz)
set(ATTNVIZ_CHANGELOG_GZ ${PROJECT_BINARY_DIR}/debian/changelog.gz)
add_custom_command(
  OUTPUT ${ATTNVIZ_CHANGELOG_GZ}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/debian
  COMMAND ${ATTNVIZ_GZIP} -9nc ${PROJECT_SOURCE_DIR}/assets/debian/changelog > ${ATTNVIZ_CHANGELOG_GZ}
  DEPENDS ${PROJECT_SOURCE_DIR}/assets/debian/changelog
  COMMENT "Compressing the Debian changelog")
add_custom_target(attnviz_package_docs ALL DEPENDS ${ATTNVIZ_CHANGELOG_GZ})
install(FILES ${PROJECT_SOURCE_DIR}/assets/debian/copyright ${ATTNVIZ_CHANGELOG_GZ}
        DESTINATION ${ATTNVIZ_DOC_DIR})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME attnviz)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "The attnviz authors")
set(CPACK_PACKAGE_CONTACT "${ATTNVIZ_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "visualizer for transformer attention heads")
# Extended description: lines under 80 columns (lintian), a blank line between paragraphs.
set(CPACK_PACKAGE_DESCRIPTION
    "attnviz draws multi-head attention as heatmaps of queries by keys, each
row one query's probability distribution over the keys. Masks (causal,
sliding window, prefix-LM, sinks, padding, chunked, document, painted
cells), ALiBi, soft-capping and the softmax temperature change the picture
live, and any view exports as a labelled PNG figure.

The headless subcommands compute attention from .npy tensors and export
figures without a display. Preset scenes each teach one point about
attention.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${ATTNVIZ_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${ATTNVIZ_HOMEPAGE}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Without a font with CJK glyphs, such tokens draw as boxes; Droid Sans Fallback is small.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "fonts-dejavu-core")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "fonts-droid-fallback | fonts-noto-cjk")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Debian's hardening: full RELRO (the compiler already defaults to PIE and stack protection).
target_link_options(attnviz PRIVATE -Wl,-z,relro,-z,now)
include(CPack)
