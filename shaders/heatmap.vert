// attnviz heatmap: one triangle that covers the whole target; the fragment shader does the rest.
// The #version line is prepended at run time.
out vec2 vUnused;
void main() {
  vec2 p = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
  vUnused = p;
  gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}
