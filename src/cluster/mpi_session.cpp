#include "cluster/mpi_session.hpp"

#include <array>
#include <iostream>

#include "crossbench/error.hpp"

namespace crossbench {

MpiSession::MpiSession() {
  int provided = 0;
  CB_CHECK_MPI(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
  // From here on an MPI failure is an Error naming the call, rank and host, not an abort inside MPI.
  CB_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CB_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  CB_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  MPI_Comm node = MPI_COMM_NULL;
  CB_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
  CB_CHECK_MPI(MPI_Comm_rank(node, &local_rank_));
  CB_CHECK_MPI(MPI_Comm_free(&node));
  CB_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &groups_));
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && groups_ != MPI_COMM_NULL) MPI_Comm_free(&groups_);
  if (!finalized) MPI_Finalize();
}

std::vector<std::string> MpiSession::allgather(const std::string& mine) const {
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size_));
  CB_CHECK_MPI(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD));
  std::vector<int> offsets(lengths.size(), 0);
  for (std::size_t i = 1; i < lengths.size(); ++i) offsets[i] = offsets[i - 1] + lengths[i - 1];
  std::string all(static_cast<std::size_t>(offsets.back() + lengths.back()), '\0');
  CB_CHECK_MPI(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
                              MPI_COMM_WORLD));
  std::vector<std::string> gathered;
  for (std::size_t i = 0; i < lengths.size(); ++i)
    gathered.push_back(all.substr(static_cast<std::size_t>(offsets[i]), static_cast<std::size_t>(lengths[i])));
  return gathered;
}

std::string MpiSession::broadcast_from_root(const std::string& text) const {
  long long length = static_cast<long long>(text.size());
  CB_CHECK_MPI(MPI_Bcast(&length, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD));
  std::string received = rank_ == 0 ? text : std::string(static_cast<std::size_t>(length), '\0');
  CB_CHECK_MPI(MPI_Bcast(received.data(), static_cast<int>(length), MPI_CHAR, 0, MPI_COMM_WORLD));
  return received;
}

void MpiSession::barrier() const { CB_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); }

void MpiSession::abort(const std::string& message, int code) const {
  std::cerr << "crossbench: fatal: " << message << "\ncrossbench: aborting all ranks (MPI_Abort)" << std::endl;
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

std::string MpiSession::library_version() const {
  std::array<char, MPI_MAX_LIBRARY_VERSION_STRING> version{};
  int length = 0;
  CB_CHECK_MPI(MPI_Get_library_version(version.data(), &length));
  std::string text(version.data(), static_cast<std::size_t>(length));
  const auto newline = text.find_first_of("\n,");  // the first line/clause is the name and version
  return newline == std::string::npos ? text : text.substr(0, newline);
}

}  // namespace crossbench
