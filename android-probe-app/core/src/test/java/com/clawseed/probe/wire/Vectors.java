package com.clawseed.probe.wire;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/** Locates and reads {@code vectors/wire}. */
public final class Vectors {
    private Vectors() {}

    public static Path dir() {
        String prop = System.getProperty("cetp.vectors.dir");
        if (prop != null) {
            return Paths.get(prop);
        }
        Path p = Paths.get("").toAbsolutePath();
        while (p != null) {
            Path candidate = p.resolve("vectors").resolve("wire");
            if (Files.isDirectory(candidate)) {
                return candidate;
            }
            p = p.getParent();
        }
        throw new IllegalStateException("vectors/wire not found; set -Dcetp.vectors.dir");
    }

    public static List<Path> goldenFiles() throws IOException {
        try (Stream<Path> s = Files.list(dir())) {
            return s.filter(f -> f.getFileName().toString().endsWith(".jsonl"))
                    .filter(f -> !f.getFileName().toString().equals("invalid.jsonl"))
                    .sorted()
                    .collect(Collectors.toList());
        }
    }

    /** The lines of a file as raw bytes, without their newlines. */
    public static List<byte[]> lines(Path file) throws IOException {
        byte[] all = Files.readAllBytes(file);
        List<byte[]> out = new ArrayList<>();
        int start = 0;
        for (int i = 0; i < all.length; i++) {
            if (all[i] == '\n') {
                byte[] line = new byte[i - start];
                System.arraycopy(all, start, line, 0, line.length);
                out.add(line);
                start = i + 1;
            }
        }
        if (start != all.length) {
            throw new IllegalStateException(file + " does not end with a newline");
        }
        return out;
    }

    public static String text(byte[] b) {
        return new String(b, StandardCharsets.UTF_8);
    }

    public static byte[] withNewline(byte[] line) {
        byte[] out = new byte[line.length + 1];
        System.arraycopy(line, 0, out, 0, line.length);
        out[line.length] = '\n';
        return out;
    }
}
