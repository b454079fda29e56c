list(APPEND MODEL_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/arch/model_config.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/arch/weights.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/arch/kv_cache.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/arch/transformer.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/arch/forward_profile.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/arch/model.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/arch/repack.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/arch/synthetic.cc)
set(ARCH_TEST_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/arch/kv_cache_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/arch/transformer_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/arch/repack_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/arch/quant_oracle_test.cc)
