# Installation layout (cmake --install, and the .deb made by cmake/Package.cmake):
#   bin/attnviz
#   share/attnviz/{scenes,models,fonts}/      found by dataDir() as ../share/attnviz from bin/
#   share/applications/org.attnviz.attnviz.desktop
#   share/metainfo/org.attnviz.attnviz.metainfo.xml
#   share/icons/hicolor/NxN/apps/attnviz.png  rendered at build time by attnviz itself
#   share/man/man1/attnviz.1.gz
include(GNUInstallDirs)

set(ATTNVIZ_APP_ID org.attnviz.attnviz)
set(ATTNVIZ_HOMEPAGE "https://attnviz.example.org/" CACHE STRING
    "Project home page (AppStream metadata and the .deb Homepage field)")
set(ATTNVIZ_SCREENSHOT_URL "https://attnviz.example.org/screenshots" CACHE STRING
    "Where assets/screenshot.png and assets/export_example.png are published, for AppStream")

set(ATTNVIZ_DATA_INSTALL_DIR ${CMAKE_INSTALL_DATADIR}/attnviz)
install(TARGETS attnviz RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/assets/scenes DESTINATION ${ATTNVIZ_DATA_INSTALL_DIR})
# The held-out text the Head finder presets run on (assets/corpora/README.md).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/assets/corpora DESTINATION ${ATTNVIZ_DATA_INSTALL_DIR})
# Shipped models and fonts, whichever exist when installing.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/assets/models ${PROJECT_SOURCE_DIR}/assets/fonts
        DESTINATION ${ATTNVIZ_DATA_INSTALL_DIR} OPTIONAL)

install(FILES ${PROJECT_SOURCE_DIR}/assets/${ATTNVIZ_APP_ID}.desktop
        DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
configure_file(${PROJECT_SOURCE_DIR}/assets/${ATTNVIZ_APP_ID}.metainfo.xml.in
               ${PROJECT_BINARY_DIR}/${ATTNVIZ_APP_ID}.metainfo.xml @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/${ATTNVIZ_APP_ID}.metainfo.xml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/metainfo)

# Icons: assets/icon.json is an 8 x 8 scene, so every hicolor size that is a multiple of 8 is an
# exact --bare render (cell = size / 8), with no resampling.
set(ATTNVIZ_ICON_OUTPUTS)
foreach(size 16 24 32 48 64 128 256)
  math(EXPR cell "${size} / 8")
  set(out ${PROJECT_BINARY_DIR}/icons/hicolor/${size}x${size}/apps/attnviz.png)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/icons/hicolor/${size}x${size}/apps
    COMMAND attnviz export --scene ${PROJECT_SOURCE_DIR}/assets/icon.json --bare --cell ${cell}
            --png ${out}
    DEPENDS attnviz ${PROJECT_SOURCE_DIR}/assets/icon.json
    COMMENT "Rendering the ${size}x${size} icon" VERBATIM)
  list(APPEND ATTNVIZ_ICON_OUTPUTS ${out})
endforeach()

# The man page, compressed as Debian policy wants (-n: no name or time stamp, reproducible).
find_program(ATTNVIZ_GZIP gzip REQUIRED)
set(ATTNVIZ_MAN_GZ ${PROJECT_BINARY_DIR}/man/attnviz.1.gz)
add_custom_command(
  OUTPUT ${ATTNVIZ_MAN_GZ}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
  COMMAND ${ATTNVIZ_GZIP} -9nc ${PROJECT_SOURCE_DIR}/assets/man/attnviz.1 > ${ATTNVIZ_MAN_GZ}
  DEPENDS ${PROJECT_SOURCE_DIR}/assets/man/attnviz.1
  COMMENT "Compressing attnviz.1")

add_custom_target(attnviz_install_data ALL DEPENDS ${ATTNVIZ_ICON_OUTPUTS} ${ATTNVIZ_MAN_GZ})
install(DIRECTORY ${PROJECT_BINARY_DIR}/icons/ DESTINATION ${CMAKE_INSTALL_DATADIR}/icons)
install(FILES ${ATTNVIZ_MAN_GZ} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
