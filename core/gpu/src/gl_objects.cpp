#include "gl_objects.h"

#include <cstdio>
#include <stdexcept>
#include <vector>

#include "attnviz/shaders/shader_source.h"

namespace attnviz::gpu {

std::string oneLine(const std::string& log) {
  std::string out;
  bool pendingSep = false;
  for (char c : log) {
    if (c == '\n' || c == '\r') {
      pendingSep = !out.empty();
      continue;
    }
    if (c == '\0') break;
    if (pendingSep) {
      out += "; ";
      pendingSep = false;
    }
    out += c;
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
  return out;
}

GlBuffer::GlBuffer(std::size_t bytes, const char* what) {
  for (int i = 0; i < 32 && glGetError() != GL_NO_ERROR; ++i) {
  }  // clear earlier errors so that the check below sees this allocation's
  glGenBuffers(1, &id_);
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, id_);
  // A zero-sized store is legal; keep at least 16 bytes so the buffer can always be bound.
  const std::size_t alloc = bytes < 16 ? 16 : bytes;
  glBufferData(GL_SHADER_STORAGE_BUFFER, GLsizeiptr(alloc), nullptr, GL_DYNAMIC_COPY);
  if (GLenum err = glGetError(); err != GL_NO_ERROR) {
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
    reset();
    throw std::runtime_error(std::string("GPU: cannot allocate ") + what + " (" +
                             std::to_string(alloc >> 20) + " MiB): GL error 0x" +
                             [&] {
                               char b[16];
                               std::snprintf(b, sizeof b, "%04X", err);
                               return std::string(b);
                             }() +
                             (err == GL_OUT_OF_MEMORY ? " (out of memory)" : ""));
  }
  const float zero = 0.0f;
  glClearBufferData(GL_SHADER_STORAGE_BUFFER, GL_R32F, GL_RED, GL_FLOAT, &zero);
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
  bytes_ = bytes;
}

void GlBuffer::upload(const void* data, std::size_t bytes, std::size_t offset) {
  if (bytes == 0) return;
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, id_);
  glBufferSubData(GL_SHADER_STORAGE_BUFFER, GLintptr(offset), GLsizeiptr(bytes), data);
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
}

void GlBuffer::download(void* data, std::size_t bytes, std::size_t offset) const {
  if (bytes == 0) return;
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, id_);
  glGetBufferSubData(GL_SHADER_STORAGE_BUFFER, GLintptr(offset), GLsizeiptr(bytes), data);
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
}

void GlBuffer::reset() {
  if (id_ != 0) glDeleteBuffers(1, &id_);
  id_ = 0;
  bytes_ = 0;
}

namespace {

std::string shaderLog(GLuint shader) {
  GLint len = 0;
  glGetShaderiv(shader, GL_INFO_LOG_LENGTH, &len);
  std::vector<char> buf(std::size_t(len > 1 ? len : 1), '\0');
  if (len > 1) glGetShaderInfoLog(shader, len, nullptr, buf.data());
  return std::string(buf.data());
}

std::string programLog(GLuint program) {
  GLint len = 0;
  glGetProgramiv(program, GL_INFO_LOG_LENGTH, &len);
  std::vector<char> buf(std::size_t(len > 1 ? len : 1), '\0');
  if (len > 1) glGetProgramInfoLog(program, len, nullptr, buf.data());
  return std::string(buf.data());
}

[[noreturn]] void fail(const std::string& label, const std::string& log) {
  std::fprintf(stderr, "attnviz: shader %s failed:\n%s\n", label.c_str(), log.c_str());
  const std::string line = oneLine(log);
  throw std::runtime_error("shader " + label + " failed: " + (line.empty() ? "(no log)" : line));
}

}  // namespace

GlProgram GlProgram::compute(const std::string& name, const std::string& defines) {
  GlProgram p;
  p.label_ = name;
  std::string source;
  try {
    source = shaderSource(name);
  } catch (const std::exception& e) {
    throw std::runtime_error("shader " + name + " failed: " + e.what());
  }
  // The file itself has no #version line: the version and the defines are separate strings,
  // and #line restores the file's own line numbers in the compiler's messages.
  const char* parts[] = {"#version 430 core\n", defines.c_str(), "#line 1\n", source.c_str()};
  GLuint shader = glCreateShader(GL_COMPUTE_SHADER);
  if (shader == 0) fail(name, "glCreateShader(GL_COMPUTE_SHADER) returned 0");
  glShaderSource(shader, 4, parts, nullptr);
  glCompileShader(shader);
  GLint ok = GL_FALSE;
  glGetShaderiv(shader, GL_COMPILE_STATUS, &ok);
  if (ok != GL_TRUE) {
    std::string log = shaderLog(shader);
    glDeleteShader(shader);
    fail(name, log);
  }
  p.id_ = glCreateProgram();
  glAttachShader(p.id_, shader);
  glLinkProgram(p.id_);
  glDetachShader(p.id_, shader);
  glDeleteShader(shader);
  glGetProgramiv(p.id_, GL_LINK_STATUS, &ok);
  if (ok != GL_TRUE) fail(name, programLog(p.id_));
  return p;
}

void GlProgram::reset() {
  if (id_ != 0) glDeleteProgram(id_);
  id_ = 0;
}

}  // namespace attnviz::gpu
