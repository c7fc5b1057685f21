// maxcode sandbox launcher: runs one untrusted program under limits and reports how it ended.
//
// Why a compiled helper: Python's preexec_fn forces a full fork of the evaluator process
// (slow with large libraries loaded); this launcher is exec'd through vfork and does the
// namespace, mount, rlimit and uid work in a few hundred microseconds.
//
// Layout when namespaces are on (root):
//   launcher: unshare(mount, net, pid, ipc, uts) -> private mounts: fresh size-capped tmpfs
//             on /tmp (the program's only writable place and its cwd), empty read-only tmpfs
//             over every --hide path (tests, caches, project) -> fork
//   init (pid 1 of the new pid namespace): fresh /proc, fork + time the program, enforce the
//             wall limit, write the status line, exit; the kernel then kills every process
//             left in the namespace (fork bombs, daemons), so nothing outlives a run.
//   program:  stdin from the test input, rlimits, CPU pinning, setsid, dedicated uid, exec.
// Without namespaces (not root) the same steps run minus unshare/mounts/uid, and the
// process group is killed at the end instead.
//
// Status line (to --status-fd): "exit=<code> signal=<sig> timeout=<0|1> wall_ns=<n>
// user_us=<n> sys_us=<n> maxrss_kb=<n> setup_error=<text-or-empty>".
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

struct Opts {
  long uid = -1, gid = -1, cpu = -1;
  long wall_ms = 10000, cpu_s = 10, nproc = 16, status_fd = 3;
  long long as_bytes = 500LL << 20, fsize_bytes = 16LL << 20, tmpfs_bytes = 64LL << 20;
  bool ns = true;
  std::string stdin_path = "/dev/null", copy, workdir = "/tmp";
  std::vector<std::string> hide;
  std::vector<char*> argv;
};

static int status_fd = 3;

[[noreturn]] static void fail_setup(const char* what) {
  dprintf(status_fd, "exit=-1 signal=0 timeout=0 wall_ns=0 user_us=0 sys_us=0 maxrss_kb=0 "
                     "setup_error=%s: %s\n", what, strerror(errno));
  _exit(111);
}

static long long now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void set_limit(int res, rlim_t soft, rlim_t hard) {
  rlimit rl{soft, hard};
  if (setrlimit(res, &rl) != 0) fail_setup("setrlimit");
}

static void copy_file(int in, const char* dst) {
  int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (out < 0) fail_setup("create program copy");
  char buf[1 << 16];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, n) != n) fail_setup("copy program");
  close(in);
  close(out);
}

static void private_mounts(const Opts& o) {
  if (mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail_setup("make / private");
  for (const auto& p : o.hide) {
    struct stat st;
    if (stat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (mount("hidden", p.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=0555") != 0)
      fail_setup("hide path");
  }
  std::string opts = "size=" + std::to_string(o.tmpfs_bytes) + ",mode=0700";
  if (mount("sandbox", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) fail_setup("mount /tmp");
  for (const char* p : {"/var/tmp", "/dev/shm", "/run"}) {
    struct stat st;
    if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
      mount("empty", p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=0555");
  }
  if (o.uid >= 0 && chown("/tmp", (uid_t)o.uid, (gid_t)o.gid) != 0) fail_setup("chown /tmp");
}

[[noreturn]] static void exec_program(const Opts& o, int stdin_fd) {
  if (dup2(stdin_fd, 0) < 0) fail_setup("stdin");
  close(stdin_fd);
  setsid();
  if (o.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)o.cpu, &set);
    sched_setaffinity(0, sizeof set, &set);  // best effort: pinning is an accuracy aid
  }
  set_limit(RLIMIT_CPU, (rlim_t)o.cpu_s, (rlim_t)o.cpu_s + 1);
  set_limit(RLIMIT_AS, (rlim_t)o.as_bytes, (rlim_t)o.as_bytes);
  set_limit(RLIMIT_FSIZE, (rlim_t)o.fsize_bytes, (rlim_t)o.fsize_bytes);
  set_limit(RLIMIT_CORE, 0, 0);
  set_limit(RLIMIT_NOFILE, 64, 64);
  set_limit(RLIMIT_NPROC, (rlim_t)o.nproc, (rlim_t)o.nproc);
  if (o.uid >= 0) {
    if (setgroups(0, nullptr) != 0) fail_setup("setgroups");
    if (setgid((gid_t)o.gid) != 0) fail_setup("setgid");
    if (setuid((uid_t)o.uid) != 0) fail_setup("setuid");
  }
  if (chdir(o.workdir.c_str()) != 0) fail_setup("chdir");
  if (status_fd > 2) fcntl(status_fd, F_SETFD, FD_CLOEXEC);  // open until exec succeeds
  execv(o.argv[0], o.argv.data());
  fail_setup("exec");
}

// Runs in the new pid namespace as pid 1 (or as a plain child without namespaces).
[[noreturn]] static void supervise(const Opts& o, int stdin_fd, int prog_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (o.ns) mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);  // our pids
  if (prog_fd >= 0) copy_file(prog_fd, (o.workdir + "/prog").c_str());
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  long long start = now_ns();
  pid_t pid = fork();
  if (pid < 0) fail_setup("fork");
  if (pid == 0) {
    sigprocmask(SIG_UNBLOCK, &chld, nullptr);
    exec_program(o, stdin_fd);
  }
  close(stdin_fd);
  long long deadline = start + o.wall_ms * 1000000LL;
  int wstatus = 0, timed_out = 0;
  for (;;) {
    pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) break;
    long long left = deadline - now_ns();
    if (left <= 0) {
      timed_out = 1;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &wstatus, 0);
      break;
    }
    timespec ts{(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
    sigtimedwait(&chld, nullptr, &ts);
  }
  long long wall = now_ns() - start;
  if (!o.ns) kill(-pid, SIGKILL);  // stragglers in its session; the namespace does this otherwise
  rusage ru;
  getrusage(RUSAGE_CHILDREN, &ru);
  int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  int sig = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
  dprintf(status_fd, "exit=%d signal=%d timeout=%d wall_ns=%lld user_us=%lld sys_us=%lld maxrss_kb=%ld setup_error=\n",
          code, sig, timed_out, wall, (long long)ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec,
          (long long)ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec, ru.ru_maxrss);
  _exit(0);
}

static Opts parse(int argc, char** argv) {
  Opts o;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") { ++i; break; }
    if (a == "--no-ns") { o.ns = false; continue; }
    if (i + 1 >= argc) { fprintf(stderr, "mcbox: %s needs a value\n", a.c_str()); exit(2); }
    const char* v = argv[++i];
    if (a == "--uid") o.uid = atol(v);
    else if (a == "--gid") o.gid = atol(v);
    else if (a == "--cpu") o.cpu = atol(v);
    else if (a == "--wall-ms") o.wall_ms = atol(v);
    else if (a == "--cpu-s") o.cpu_s = atol(v);
    else if (a == "--nproc") o.nproc = atol(v);
    else if (a == "--status-fd") o.status_fd = atol(v);
    else if (a == "--as-bytes") o.as_bytes = atoll(v);
    else if (a == "--fsize-bytes") o.fsize_bytes = atoll(v);
    else if (a == "--tmpfs-bytes") o.tmpfs_bytes = atoll(v);
    else if (a == "--stdin") o.stdin_path = v;
    else if (a == "--copy") o.copy = v;
    else if (a == "--workdir") o.workdir = v;
    else if (a == "--hide") o.hide.push_back(v);
    else { fprintf(stderr, "mcbox: unknown option %s\n", a.c_str()); exit(2); }
  }
  if (o.ns) o.workdir = "/tmp";  // the private tmpfs
  for (; i < argc; ++i) o.argv.push_back(argv[i]);
  o.argv.push_back(nullptr);
  if (o.argv.size() < 2) { fprintf(stderr, "mcbox: no program after --\n"); exit(2); }
  return o;
}

int main(int argc, char** argv) {
  Opts o = parse(argc, argv);
  status_fd = (int)o.status_fd;
  int stdin_fd = open(o.stdin_path.c_str(), O_RDONLY);  // opened before privileges drop
  if (stdin_fd < 0) fail_setup("open stdin");
  int prog_fd = -1;  // opened before /tmp and hidden paths are covered
  if (!o.copy.empty() && (prog_fd = open(o.copy.c_str(), O_RDONLY | O_CLOEXEC)) < 0)
    fail_setup("open program");
  if (o.ns) {
    if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS) != 0)
      fail_setup("unshare");
    private_mounts(o);
  }
  pid_t init = fork();
  if (init < 0) fail_setup("fork init");
  if (init == 0) supervise(o, stdin_fd, prog_fd);
  close(stdin_fd);
  int st = 0;
  while (waitpid(init, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 112;
}
