# ATTNVIZ_UNITY (./dev's test and sanitizer trees): each target's sources are compiled in batches
# of 8, one compiler run a batch (CMake's unity build), so the headers' templates (nlohmann-json,
# gtest, Eigen, the standard library) are instantiated and optimised once a batch instead of once
# a file: that is most of a file's compile time here. A source whose file-local names (an
# anonymous namespace's helpers and constants) repeat another source's of the same target is
# compiled alone: attnviz_unity_alone() below lists them, by folder. A build without
# ATTNVIZ_UNITY (./dev app, a developer's own tree) compiles file by file, so an edit recompiles
# one file.
if(NOT ATTNVIZ_UNITY)
  return()
endif()
set(CMAKE_UNITY_BUILD ON)
set(CMAKE_UNITY_BUILD_BATCH_SIZE 8)

# Called at the end of the top-level CMakeLists.txt, once every target exists.
function(attnviz_unity_alone)
  set(alone
    shaders:shader_source.cpp
    core:engine/src/flash_walkthrough.cpp
    core:formats/src/gguf.cpp core:formats/src/image.cpp core:formats/src/npy.cpp
    core:formats/src/safetensors.cpp
    core:model/tokenizers/marian.cpp core:model/tokenizers/sentencepiece.cpp
    core:model/src/weights.cpp core:model/src/qk_split.cpp core:model/src/head_tree.cpp
    core:render/src/overlay_figure.cpp core:render/src/grid_figure.cpp core:render/src/raster.cpp
    app:gui/frame.cpp
    tests/model:model_names_test.cpp
    tests/app:head_finder_app_test.cpp
    tests/engine:isa_test.cpp
    tests/model:gguf_model_test.cpp
    tests/model:shipped_llama_test.cpp
    tests/tokenizers:wordpiece_test.cpp
    tests/app:chat_app_test.cpp
    tests/app:image_view_app_test.cpp
    tests/app:model_presets_app_test.cpp
    tests/app:model_switch_app_test.cpp
    tests/app:open_preview_app_test.cpp
    tests/cli:pooled_test.cpp
    tests/engine:flash_walkthrough_test.cpp
    tests/formats:scene_loader_test.cpp
    tests/model:decoder_families_test.cpp
    tests/model:encoder_gguf_test.cpp
    tests/model:model_errors_test.cpp
    tests/model:model_reference_test.cpp
    tests/model:retrieval_test.cpp
    tests/model:score_test.cpp
    tests/model:seq2seq_test.cpp
    tests/model:seq2seq_translate_test.cpp
    tests/model:shipped_gemma2_test.cpp
    tests/model:shipped_model_test.cpp
    tests/model:shipped_t5_test.cpp
    tests/model:vision_overlay_test.cpp
    tests/render:raster_test.cpp
    tests/tokenizers:sentencepiece_test.cpp
    tests/tokenizers:tokenizer_json_test.cpp
    tests/tokenizers:unigram_test.cpp
  )
  foreach(entry IN LISTS alone)
    string(REPLACE ":" ";" entry ${entry})
    list(GET entry 0 dir)
    list(GET entry 1 file)
    set_source_files_properties(${PROJECT_SOURCE_DIR}/${dir}/${file}
      DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL attnviz_unity_alone)
