# Run at BUILD time (the crossbench_git_revision target), never at configure time:
# writes git_revision.cpp (one translation unit: only it recompiles) with `git describe`'s commit and "-dirty" when the
# working tree differs from it. The header is rewritten only when the text
# changes, so an unchanged tree rebuilds nothing.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE revision OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE status)
if(NOT status EQUAL 0 OR NOT revision)
  set(revision "unknown")
else()
  # Tracked files that differ from HEAD (untracked files do not change the build).
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changes)
    set(revision "${revision}-dirty")
  endif()
endif()
set(text "// Generated at build time by cmake/git_revision.cmake: the source revision this binary was built from.
#include \"crossbench/build_info.hpp\"
namespace crossbench::build_info {
const char* const git_revision = \"${revision}\";  // \"-dirty\": tracked files differed from the commit
}  // namespace crossbench::build_info
")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUTPUT} "${text}")
endif()
