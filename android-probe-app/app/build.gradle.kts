plugins {
    id("com.android.application")
}

android {
    namespace = "com.clawseed.probe"
    compileSdk = 34

    defaultConfig {
        applicationId = "com.clawseed.probe"
        minSdk = 26
        targetSdk = 34
        versionCode = 1
        versionName = "0.1.0"
    }

    // Two identities for cross-caller tests: each flavor is its own app
    // (own UID and package) listening on its own abstract socket.
    flavorDimensions += "identity"
    productFlavors {
        create("a") {
            dimension = "identity"
            buildConfigField("String", "SOCKET_NAME", "\"cetp-probe\"")
            buildConfigField("String", "IDENTITY_NAME", "\"a\"")
        }
        create("b") {
            dimension = "identity"
            applicationIdSuffix = ".b"
            buildConfigField("String", "SOCKET_NAME", "\"cetp-probe-b\"")
            buildConfigField("String", "IDENTITY_NAME", "\"b\"")
        }
    }

    buildFeatures {
        buildConfig = true
    }

    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_17
        targetCompatibility = JavaVersion.VERSION_17
    }

    lint {
        // QUERY_ALL_PACKAGES is intended: a test probe must see every Provider.
        disable += "QueryAllPackagesPermission"
    }
}

dependencies {
    implementation(project(":core"))
}
