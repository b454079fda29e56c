# Chat templates: a Jinja2 interpreter (jinja_*) and the chat-template API.
find_package(Boost 1.81 REQUIRED COMPONENTS json)
list(APPEND MODEL_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/builtin_templates.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/chat_prompt.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/chat_template.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/jinja_budget.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/jinja_filters.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/jinja_interpreter.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/jinja_json.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/jinja_lexer.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/jinja_methods.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/jinja_ops.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/jinja_parser.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/jinja_unicode.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/jinja_value.cc)
list(APPEND MODEL_LIBS Boost::json)
set(CHAT_TEST_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/chat_template_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/jinja_budget_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/chat/jinja_test.cc)
