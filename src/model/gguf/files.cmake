# GGUF reader and writer (model/gguf). Included by src/model/CMakeLists.txt.
list(APPEND MODEL_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/gguf/gguf.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/gguf/gguf_writer.cc)
set(GGUF_TEST_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/gguf/gguf_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/gguf/gguf_hostile_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/gguf/gguf_test_util.cc)
