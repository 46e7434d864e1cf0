// A real Prometheus server (Debian package prometheus) on loopback scrapes a real trainerd
// that has finished a run: every query of the Grafana dashboard returns data, and every alert
// rule of deploy/prometheus loads and evaluates without error.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "../support/child_process.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job.h"
#include "../support/utc_clock.h"
#include "trainerd/daemon/asio.h"
#include "trainerd/store/store.h"

namespace trainerd {
namespace {

namespace asio = daemon::asio;
using testing::ChildProcess;

// A loopback port nobody listens on right now.
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

std::string UrlEncode(const std::string& text) {
  std::ostringstream out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out << c;
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out << hex;
    }
  }
  return out.str();
}

// GET http://127.0.0.1:port/target; the body, or "" when the server does not answer.
std::string HttpGet(int port, const std::string& target) {
  try {
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
    const std::string request =
        "GET " + target + " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    asio::write(socket, asio::buffer(request));
    std::string response;
    boost::system::error_code ec;
    asio::read(socket, asio::dynamic_buffer(response), ec);
    const auto body = response.find("\r\n\r\n");
    return body == std::string::npos ? "" : response.substr(body + 4);
  } catch (const std::exception&) {
    return "";
  }
}

nlohmann::json Query(int port, const std::string& promql) {
  return nlohmann::json::parse(HttpGet(port, "/api/v1/query?query=" + UrlEncode(promql)), nullptr,
                               false);
}

std::string SourcePath(const std::string& relative) {
  const char* root = std::getenv("TRAINERD_SOURCE_DIR");
  return root == nullptr ? relative : std::string(root) + "/" + relative;
}

void CollectExprs(const nlohmann::json& node, std::vector<std::string>* out) {
  if (node.is_object()) {
    if (node.contains("expr") && node["expr"].is_string()) out->push_back(node["expr"]);
    for (const auto& item : node.items()) CollectExprs(item.value(), out);
  } else if (node.is_array()) {
    for (const auto& item : node) CollectExprs(item, out);
  }
}

template <typename Predicate>
bool Eventually(Predicate done, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST(PrometheusIntegrationTest, DashboardQueriesReturnDataAndAlertRulesEvaluate) {
  testing::TempDir dir;
  const int metrics_port = FreePort();
  const int prometheus_port = FreePort();
  const std::string target = "127.0.0.1:" + std::to_string(metrics_port);
  // The planner chooses the plan: its time model's error is one of the dashboard's series.
  // Two nights, a release each, and outcomes for both: the outcome panels' series.
  testing::TinyGptYamlOptions job;
  dir.Write("trainerd.yaml", "job: job.yaml\nstate_dir: state\nmetrics: {listen: \"" + target +
                                 "\"}\ncost: {per_device_hour: 0.35}\n"
                                 "regression: {eval_loss_tolerance: 100%, throughput_tolerance: "
                                 "95%, beat_baseline: false}\n");
  for (const int updates : {20, 24}) {
    job.updates = updates;
    dir.Write("job.yaml", testing::TinyGptYaml(job));
    ChildProcess daemon({TRAINERD_PATH, "--config", dir.File("trainerd.yaml"), "--once"});
    ASSERT_EQ(daemon.ExitCode(), 0) << daemon.ReadAllStderr();
  }
  {
    Result<std::unique_ptr<store::Store>> store = store::Store::Open(dir.File("state/trainerd.db"));
    ASSERT_TRUE(store.ok()) << store.status().message();
    const store::Release current = *(*store)->CurrentRelease().value();
    ASSERT_TRUE(current.previous_release_id.has_value());
    for (const std::int64_t release : {current.id, *current.previous_release_id}) {
      const double at = *(*store)->GetRelease(release)->live_at + 1;
      ASSERT_TRUE((*store)->RecordOutcomes({{release, "en", "ctr", at, 0.1, 10}}).ok());
    }
  }
  // --once exits after its cycle: serve the finished run's metrics from a long-running
  // daemon whose next window is hours away (it restores them from the store).
  dir.Write("trainerd.yaml", "job: job.yaml\nstate_dir: state\nmetrics: {listen: \"" + target +
                                 "\"}\nschedule: {start: \"" + testing::UtcClock(3 * 3600) +
                                 "\", window: 1m, "
                                 "deadline_grace: 10s}\n"
                                 // Only judged outcomes are exported.
                                 "outcomes: {metrics: [{name: ctr, better: higher}]}\n");
  ChildProcess serving({TRAINERD_PATH, "--config", dir.File("trainerd.yaml")});
  ASSERT_TRUE(Eventually(
      [&] {
        return HttpGet(metrics_port, "/metrics").find("trainerd_mfu_ratio") != std::string::npos;
      },
      60))
      << "trainerd does not serve /metrics on " << target;

  dir.Write("prometheus.yml",
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "rule_files: [" +
                SourcePath("deploy/prometheus/trainerd-alerts.yml") +
                "]\n"
                "scrape_configs:\n  - job_name: trainerd\n    static_configs:\n"
                "      - targets: ['" +
                target + "']\n");
  ChildProcess prometheus({TRAINERD_PROMETHEUS, "--config.file=" + dir.File("prometheus.yml"),
                           "--storage.tsdb.path=" + dir.File("tsdb"),
                           "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port)});
  ASSERT_TRUE(Eventually(
      [&] {
        const nlohmann::json up = Query(prometheus_port, "up{job=\"trainerd\"}");
        return up.is_object() && up.value("status", "") == "success" &&
               !up["data"]["result"].empty() && up["data"]["result"][0]["value"][1] == "1";
      },
      60))
      << "Prometheus did not scrape trainerd";
  std::this_thread::sleep_for(std::chrono::seconds(4));  // a few samples for increase()

  std::ifstream file(SourcePath("deploy/grafana/dashboards/trainerd.json"));
  const nlohmann::json dashboard = nlohmann::json::parse(file, nullptr, false);
  std::vector<std::string> exprs;
  CollectExprs(dashboard, &exprs);
  ASSERT_GT(exprs.size(), 10u);
  for (std::string expr : exprs) {
    for (std::size_t at; (at = expr.find("$instance")) != std::string::npos;) {
      expr.replace(at, 9, target);
    }
    const nlohmann::json result = Query(prometheus_port, expr);
    ASSERT_TRUE(result.is_object()) << expr;
    EXPECT_EQ(result.value("status", ""), "success") << expr << "\n" << result.dump();
    EXPECT_FALSE(result["data"]["result"].empty()) << "no data: " << expr;
  }

  ASSERT_TRUE(Eventually(
      [&] {
        const nlohmann::json rules =
            nlohmann::json::parse(HttpGet(prometheus_port, "/api/v1/rules"), nullptr, false);
        if (!rules.is_object() || rules["data"]["groups"].empty()) return false;
        for (const auto& group : rules["data"]["groups"]) {
          for (const auto& rule : group["rules"]) {
            if (rule.value("health", "") != "ok") return false;
          }
        }
        return true;
      },
      30))
      << HttpGet(prometheus_port, "/api/v1/rules");
  serving.Signal(SIGTERM);
  EXPECT_EQ(serving.ExitCode(), 0);
  prometheus.Signal(SIGTERM);
  prometheus.Wait();
}

}  // namespace
}  // namespace trainerd
