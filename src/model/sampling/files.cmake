# Sampling: params, the sampling steps, the Sampler and stop/finish logic.
set(_sampling_dir ${CMAKE_CURRENT_SOURCE_DIR}/sampling)
list(APPEND MODEL_SOURCES
  ${_sampling_dir}/sampler.cc
  ${_sampling_dir}/sampling_ops.cc
  ${_sampling_dir}/sampling_params.cc
  ${_sampling_dir}/stop_matcher.cc)

# Seeded sampling must give the same tokens on every platform: no fused
# multiply-add contraction in the probability arithmetic (GCC contracts by
# default in GNU mode and with -march flags that have FMA).
set_source_files_properties(
  ${_sampling_dir}/sampler.cc
  ${_sampling_dir}/sampling_ops.cc
  PROPERTIES COMPILE_OPTIONS -ffp-contract=off)

set(SAMPLING_TEST_SOURCES
  ${_sampling_dir}/sampler_test.cc
  ${_sampling_dir}/sampling_ops_test.cc
  ${_sampling_dir}/sampling_params_test.cc
  ${_sampling_dir}/stop_matcher_test.cc)
