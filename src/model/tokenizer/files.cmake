# Tokenizers (model/tokenizer): SentencePiece, byte-level BPE with PCRE2
# pre-tokenizers, WordPiece, special tokens and streaming detokenization.
# Included by src/model/CMakeLists.txt.
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)

set(_tokenizer_dir ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer)
list(APPEND MODEL_SOURCES
  ${_tokenizer_dir}/bpe.cc
  ${_tokenizer_dir}/byte_level.cc
  ${_tokenizer_dir}/pre_tokenizer.cc
  ${_tokenizer_dir}/special_tokens.cc
  ${_tokenizer_dir}/spm.cc
  ${_tokenizer_dir}/streaming_detokenizer.cc
  ${_tokenizer_dir}/tokenizer.cc
  ${_tokenizer_dir}/unicode_data.cc
  ${_tokenizer_dir}/unicode_lookup.cc
  ${_tokenizer_dir}/vocab.cc
  ${_tokenizer_dir}/wordpiece.cc)
list(APPEND MODEL_LIBS PkgConfig::PCRE2)

set(TOKENIZER_TEST_SOURCES
  ${_tokenizer_dir}/pre_tokenizer_test.cc
  ${_tokenizer_dir}/streaming_detokenizer_test.cc
  ${_tokenizer_dir}/tokenizer_test.cc
  ${_tokenizer_dir}/unicode_data_test.cc
  ${_tokenizer_dir}/vocab_files_test.cc)
