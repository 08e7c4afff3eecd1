# cmake -P expect_refusal.cmake -- REGEX PROGRAM [ARGS...]
#
# Runs PROGRAM with ARGS and passes only if it refuses them: it exits with an
# error status of its own (not 0, and not a signal such as a crash) and its
# output (stdout and stderr together) matches REGEX, the message that says why.
# Why not PASS_REGULAR_EXPRESSION alone: CTest then ignores the exit status,
# so a binary that printed the message and went on to train, or crashed after
# printing it, would pass.
set(first -1)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(CMAKE_ARGV${i} STREQUAL "--")
    math(EXPR first "${i} + 1")
    break()
  endif()
endforeach()
if(first LESS 0 OR first GREATER_EQUAL last)
  message(FATAL_ERROR "usage: cmake -P expect_refusal.cmake -- REGEX PROGRAM [ARGS...]")
endif()
set(expected "${CMAKE_ARGV${first}}")
math(EXPR first "${first} + 1")
set(command)
foreach(i RANGE ${first} ${last})
  # A semicolon inside an argument stays in it, not a list separator.
  string(REPLACE ";" "\\;" arg "${CMAKE_ARGV${i}}")
  list(APPEND command "${arg}")
endforeach()

execute_process(COMMAND ${command} RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
message("${output}")
if(NOT status MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the command did not exit by itself: ${status}")
elseif(status EQUAL 0)
  message(FATAL_ERROR "the command exited 0: it was not refused")
elseif(NOT output MATCHES "${expected}")
  message(FATAL_ERROR "the command failed (status ${status}) without saying: ${expected}")
endif()
message("refused with status ${status}, as expected")
