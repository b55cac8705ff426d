#include "crossbench/error.hpp"

#include <mpi.h>
#include <unistd.h>

#include <array>
#include <cerrno>

namespace crossbench {

std::string where_am_i() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host = {'?'};
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return "rank " + std::to_string(rank) + " on host " + host.data();
  }
  return "process " + std::to_string(getpid()) + " on host " + host.data();
}

std::string printable(std::string_view text) {
  static constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";
  std::string shown;
  shown.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (text.substr(i, kByteOrderMark.size()) == kByteOrderMark) {
      shown += "<BOM>";
      i += kByteOrderMark.size() - 1;
    } else if (byte == 0) {
      shown += "\\0";
    } else if ((byte < 0x20 && byte != '\n' && byte != '\t') || byte == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      shown += "\\x";
      shown += kHex[byte >> 4];
      shown += kHex[byte & 0xf];
    } else {
      shown += static_cast<char>(byte);
    }
  }
  return shown;
}

bool is_storage_failure(int error_code) {
  return error_code == ENOSPC || error_code == EDQUOT || error_code == EFBIG || error_code == EROFS ||
         error_code == EIO;
}

std::string describe_failure(std::string_view library, std::string_view call, const char* file,
                             int line, std::string_view message) {
  std::string text;
  text.append(library).append(" call `").append(call).append("` failed at ").append(file);
  text.append(":").append(std::to_string(line)).append(" on ").append(where_am_i());
  text.append(": ").append(message);
  return text;
}

void throw_library_error(std::string_view library, std::string_view call, const char* file,
                         int line, std::string_view message, bool out_of_memory) {
  const std::string text = describe_failure(library, call, file, line, message);
  if (out_of_memory) throw OutOfMemory(text);
  throw Error(text);
}

void check_mpi(int code, const char* call, const char* file, int line) {
  if (code == MPI_SUCCESS) return;
  std::array<char, MPI_MAX_ERROR_STRING> message{};
  int length = 0;
  if (MPI_Error_string(code, message.data(), &length) != MPI_SUCCESS) length = 0;
  throw_library_error("MPI", call, file, line,
                      length > 0 ? std::string_view(message.data(), length) : "unknown MPI error");
}

}  // namespace crossbench
